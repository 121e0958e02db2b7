---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.llm
local llm = {}

---`llm.NOT_CONFIGURED` — the message (a string) `configured()` gives when nothing at all is
---  configured: no key, no URL, no model.
---@type any
llm.NOT_CONFIGURED = nil

---`llm.parse_timeout(text)` → `{timeout=, idle_timeout=, connect_timeout=, start_timeout=}` (the parts given) or
---  `nil, why` (the message shows the form, `llm.TIMEOUT_FORMAT`): the `KAGENT_LLM_TIMEOUT` form,
---  for scripts' own options.
---@type any
llm.TIMEOUT_FORMAT = nil

---**Choosing the provider and model.** A model is named `"provider:model"`. Providers:
---`anthropic` (Messages API), `openai` (Chat Completions; also any OpenAI-compatible server —
---vLLM, llama.cpp server, Ollama, a relay — given its base URL). Settings are read, in order of
---precedence, from `llm.configure{...}`, then the environment (`.env` is loaded by `kagent-rt`):
---@param args table
---@return any
function llm.configure(args) end

---`llm.configured()` → `true, "anthropic:claude-..."` or `false, "<what to set or fix>", code`
---  (`ENOTSUP` or `EAUTH` for settings; the failure's code, e.g. `ECONNECT`, when a local server
---  asked for its model did not answer). When nothing at all is configured the message is
---  llm.NOT_CONFIGURED (below). Agents use it to fall back to the LLM-free tuner (only then). ⏸
---  only when no model is named and an OpenAI-compatible server is asked for its model list (with
---  the retries and timeouts of a call; the list is kept for the run). Whether the server answers,
---  takes the key and serves the model is `llm.check`'s question.
---@return boolean, string, string?
function llm.configured() end

---`llm.check(models)` ⏸ → `true`, or `nil, "CODE: message", "CODE"`: one request per server,
---  before any work, for the configured model and each of `models` (an array of `"provider:model"`
---  or bare names; optional). OpenAI-compatible servers: `GET {base}/models` (the list kept for the
---  run, so several models of one server take one request); Anthropic: `GET /v1/models/{model}`
---  (which resolves an alias to its dated id; on a 404 its list is asked to name the models it
---  has). `EAUTH`: the key is refused (HTTP 401/403; a server that wants a key and has none names
---  the variable). `ENOTFOUND`: the model is not listed (a name without a tag also takes `name:latest`, as
---  Ollama serves it; the message names those listed), or the
---  URL has no model list (HTTP 404 on `/models`: the message suggests the `/v1` an
---  OpenAI-compatible URL lacks, or the one an Anthropic base URL should not have). A server that
---  does not answer fails as a call does (`ECONNECT`, "nothing listens at URL (connection refused)"
---  on this machine, never retried; `ETIMEDOUT`; `EHTTP`), within at most 60 s, the list's wait
---  bounded by the start timeout. A strict replay (`cache` `"replay"`) sends nothing and answers
---  `true`. The agents call it at start-up (docs/agents.md, "The LLM is checked first"). Its
---  messages and logs, like every `kagent.llm` message, name a URL without credentials
---  (`user:password@`) or query.
---@param models any
---@return boolean?, string?, string?
function llm.check(models) end

---`llm.models()` ⏸ → array of the model ids the configured OpenAI-compatible server lists, or
---  `nil, "CODE: message", "CODE"`.
---@return string[]?, string?, string?
function llm.models() end

---`llm.parse_timeout(text)` → `{timeout=, idle_timeout=, connect_timeout=, start_timeout=}` (the parts given) or
---  `nil, why` (the message shows the form, `llm.TIMEOUT_FORMAT`): the `KAGENT_LLM_TIMEOUT` form,
---  for scripts' own options.
---@param text string
---@return any
function llm.parse_timeout(text) end

---`llm.chat{...}` ⏸ → `result`, or `nil, "CODE: message", "CODE", info`. Fields:
---  - `messages`: array of `{role = "user"|"assistant", content = string, cache = bool}` (required).
---    `cache = true` marks the end of a shared prefix (problem, kernel) for prompt caching.
---  - `system`: system prompt (string). Cached by default with Anthropic (`cache_system = false` to
---    stop it).
---  - `model` (`"provider:model"` or a bare name for the configured provider), `max_tokens` (sent
---    as given: never capped), `temperature`, `top_p`, `stop` (array), `reasoning_effort`
---    (`"low"|"medium"|"high"`: OpenAI reasoning models; with Anthropic it becomes extended
---    thinking with budget `thinking_tokens`, default 4096), `timeout`, `idle_timeout`, `retries`
---    (this call's), `stream` (boolean; default from `configure{stream}` or `KAGENT_LLM_STREAM`),
---    `on_token`, `extra` (table merged into the request body as is), `tag` (string kept in the
---    record, for the run's logs), `prompt_cache = false` (no `cache_control` at all),
---    `replay_key` (a non-empty string: record and replay the call under this key instead of its
---    body; see *Record and replay*).
---  - `on_token(text, progress)` runs in the calling task (it may use ⏸ functions; an error in it
---    aborts the call and is raised from `chat`). Streaming: once per delta as it arrives (`text` is
---    `""` for a reasoning/thinking delta, so the counters still move). Otherwise: once, with the
---    whole text, when the reply is in (also for a replayed reply). `progress` (one table per call,
---    updated in place: read it, do not keep it): `attempt` (an attempt that fails mid-stream is
---    retried and its text starts over: `attempt` goes up, `chars` restarts), `chars`, `tokens`
---    (so far: chunks for the OpenAI format, which sends one token each; characters/4 for Anthropic
---    until its count arrives), `elapsed` (since the attempt began), `first_token_s`, `tokens_per_s`
---    (`(tokens − 1)` over the time since the first delta; `nil` until two tokens).
---  - Result: `{text, usage = {input_tokens, output_tokens, cache_read_tokens, cache_write_tokens},
---    cost_usd, priced, model, provider, latency, cached, attempts, stop_reason, truncated, streamed,
---    first_token_s, tokens_per_s, usage_estimated}`. `priced` is `false` when the price table
---    (built in, or `configure{prices}`) has no price for the model: `cost_usd` is then 0 and the
---    cost is unknown, not free. `cached` is `true` when the reply came from the
---    record/replay cache (no request made); `attempts` counts HTTP attempts (0 when replayed);
---    `truncated` is `true` when the reply stopped at `max_tokens` (also logged as a warning).
---    `input_tokens` counts uncached input only. `latency`: seconds of the whole call, retries
---    included. `first_token_s`: streamed only, seconds from the start of the attempt that succeeded
---    to its first delta. `tokens_per_s`: streamed, `(output_tokens − 1)` over the time from the
---    first delta to the end (the decoding rate); whole, `output_tokens` over the attempt's time
---    (time to first token included); `nil` when replayed or too short to time. `usage_estimated`:
---    the server streamed no usage, so `output_tokens` is the count of streamed tokens.
---  - Failures — every code below is an LLM failure, never a kernel's: `ENOTSUP` (nothing usable
---    configured: no provider, no model named and the server does not list exactly one, or an
---    unreadable `KAGENT_LLM_*` setting; the message says what to set), `EAUTH` (no key, or 401/403:
---    the message names the key variable, never the key), `EBADREQ` (400, e.g. the prompt is over
---    the context length), `ENOTFOUND` (404: no such model; from a self-hosted server the message
---    adds the models it lists), `ERATELIMIT` (429/529 after the retries, or an overloaded/rate-limit
---    error event mid-stream), `EHTTP` (5xx after the retries, another status, the connection closed
---    mid-reply, or another error event mid-stream), `ETIMEDOUT` (the start or connect timeout of a
---    stream, at once; the idle timeout after the retries, or the call's total timeout; the message
---    says what stalled), `ETOOBIG` (a reply over `max_body` or `max_reply`, not retried), `ECONNECT` (refused, DNS,
---    TLS, after the retries), `EPARSE` (a reply that is not the expected JSON, or a stream that ended
---    before its end event: truncated), `EBUDGET` (a budget is spent: no request is made), `EREPLAY`
---    (mode `replay` and the request is not in the record), `EDB` (the record/replay database).
---    After several attempts the message ends with `gave up after N attempts in S s (why)`.
---  - `info` (the fourth value of a failure) → `{code, message, status, server_error, attempts,
---    elapsed, retryable, provider, model}`: `status` is the HTTP status of the last reply (absent
---    when none came; 200 for an error event mid-stream), `server_error` the server's own words from
---    its error body or event (the error shapes of OpenAI, Anthropic, vLLM, llama.cpp, Ollama and
---    relays, or a proxy page as short text), `attempts` the HTTP attempts made, `retryable` whether
---    the last failure was of a retried kind. No message, `info` field or log line contains the API
---    key, even when a server quotes the request back (it is replaced by `***`).
---  - Retried: 408, 409, 429, 500, 502, 503, 504, 529, `ETIMEDOUT` of a started reply (a stall),
---    `ECONNECT`, `EHTTP` transport errors and error events mid-stream (as their status). Not
---    retried: 400, 401, 403, 404, `EPARSE`, `ETOOBIG`, and a stream that did not start (no
---    connection or no headers in time). A retry waits the reply's `Retry-After` (or `retry-after-ms`) capped at
---    `backoff.max`, else the backoff; no retry starts that the call's `timeout` would cut. Each
---    retry is logged as a warning when it happens (`llm: <provider> <model>: CODE: what; retry k/n
---    in S s`), and so is giving up on a retried kind. The concurrency slot is not held while
---    waiting. Killing the calling task aborts its transfer and gives its slot back.
---  - Prompt caching (Anthropic): the provider caches a prefix only once a reply to it has begun,
---    and only prefixes of at least ~1024 tokens (2048 for Haiku). To share a prefix among parallel
---    workers, let one call with it finish first, then fan out. OpenAI caches long prefixes by
---    itself; its cached tokens are reported as `cache_read_tokens`.
---@param args table
---@return kagent.llm.Result?, string?, string?, kagent.llm.Failure?
function llm.chat(args) end

---`llm.usage()` → run totals `{calls, failures, failures_by_code = {[code] = n}, input_tokens,
---  output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, http_requests, retries,
---  replayed, replay_misses, unpriced_calls, gen_tokens, gen_seconds, tokens_per_s, by_model =
---  {[model] = {...}}}`. `unpriced_calls`: calls of models without a price (their cost is unknown).
---  `tokens_per_s` = `gen_tokens / gen_seconds`, summed over the timed calls (as each result's
---  `tokens_per_s`; replays are not timed): the mean decoding rate of one call, for a status line.
---  `llm.reset_usage()` zeroes them. `llm.total_tokens(u)` → the tokens a usage table counts
---  (input + output + cache reads + cache writes), the one formula for budgets and summaries.
---@return kagent.llm.Usage
function llm.usage() end

---`llm.usage()` → run totals `{calls, failures, failures_by_code = {[code] = n}, input_tokens,
---  output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, http_requests, retries,
---  replayed, replay_misses, unpriced_calls, gen_tokens, gen_seconds, tokens_per_s, by_model =
---  {[model] = {...}}}`. `unpriced_calls`: calls of models without a price (their cost is unknown).
---  `tokens_per_s` = `gen_tokens / gen_seconds`, summed over the timed calls (as each result's
---  `tokens_per_s`; replays are not timed): the mean decoding rate of one call, for a status line.
---  `llm.reset_usage()` zeroes them. `llm.total_tokens(u)` → the tokens a usage table counts
---  (input + output + cache reads + cache writes), the one formula for budgets and summaries.
---@return any
function llm.reset_usage() end

---`llm.usage()` → run totals `{calls, failures, failures_by_code = {[code] = n}, input_tokens,
---  output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, http_requests, retries,
---  replayed, replay_misses, unpriced_calls, gen_tokens, gen_seconds, tokens_per_s, by_model =
---  {[model] = {...}}}`. `unpriced_calls`: calls of models without a price (their cost is unknown).
---  `tokens_per_s` = `gen_tokens / gen_seconds`, summed over the timed calls (as each result's
---  `tokens_per_s`; replays are not timed): the mean decoding rate of one call, for a status line.
---  `llm.reset_usage()` zeroes them. `llm.total_tokens(u)` → the tokens a usage table counts
---  (input + output + cache reads + cache writes), the one formula for budgets and summaries.
---@param u any
---@return any
function llm.total_tokens(u) end

---`llm.extract_code(text, lang)` → the code of a fenced block: with `lang`, the last block tagged
---  `lang` (aliases: `py`/`python3` = `python`, `c++` = `cpp`, `cu` = `cuda`), else the last untagged
---  block, else the last block; without `lang`, the last block; `nil` when there is none. An unclosed
---  final fence (a reply cut at `max_tokens`) counts up to the end of the text.
---@param text string
---@param lang? string
---@return string?
function llm.extract_code(text, lang) end

---`llm.extract_json(text)` → value, or `nil, "EPARSE: ...", "EPARSE"`. Accepts bare JSON, a
---  ```` ```json ```` fence, or the first balanced `{...}`/`[...]` in prose.
---@param text string
---@return any
function llm.extract_json(text) end

---`llm.cache_mode()` → the mode in force: `"off"`, `"record"`, `"replay"` or `"auto"`
---  (`configure{cache}`, else `KAGENT_LLM_CACHE`, else `"off"`).
---@return string
function llm.cache_mode() end

return llm
