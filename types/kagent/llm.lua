---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.llm
local llm = {}

---**Choosing the provider and model.** A model is named `"provider:model"`. Providers:
---`anthropic` (Messages API), `openai` (Chat Completions; also any OpenAI-compatible server —
---vLLM, llama.cpp server, Ollama, a relay — given its base URL). Settings are read, in order of
---precedence, from `llm.configure{...}`, then the environment (`.env` is loaded by `kagent-rt`):
---@param args table
---@return any
function llm.configure(args) end

---`llm.configured()` → `true, "anthropic:claude-..."` or `false, "<which variables to set>"`.
---  Agents use it to fall back to the LLM-free tuner.
---@return any
function llm.configured() end

---`llm.chat{...}` ⏸ → `result`, or `nil, "CODE: message", "CODE"`. Fields:
---  - `messages`: array of `{role = "user"|"assistant", content = string, cache = bool}` (required).
---    `cache = true` marks the end of a shared prefix (problem, kernel) for prompt caching.
---  - `system`: system prompt (string). Cached by default with Anthropic (`cache_system = false` to
---    stop it).
---  - `model` (`"provider:model"` or a bare name for the configured provider), `max_tokens` (sent
---    as given: never capped), `temperature`, `top_p`, `stop` (array), `reasoning_effort`
---    (`"low"|"medium"|"high"`: OpenAI reasoning models; with Anthropic it becomes extended
---    thinking with budget `thinking_tokens`, default 4096), `timeout`, `retries`, `extra` (table
---    merged into the request body as is), `tag` (string kept in the record, for the run's logs),
---    `prompt_cache = false` (no `cache_control` at all).
---  - Result: `{text, usage = {input_tokens, output_tokens, cache_read_tokens, cache_write_tokens},
---    cost_usd, model, provider, latency, cached, attempts, stop_reason, truncated}`. `cached` is
---    `true` when the reply came from the record/replay cache (no request made); `attempts` counts
---    HTTP attempts (0 when replayed); `truncated` is `true` when the reply stopped at `max_tokens`
---    (also logged as a warning). `input_tokens` counts uncached input only.
---  - Failures: `ENOTSUP` (no provider configured: the message names the variables to set), `EAUTH`
---    (401/403: the message names the key variable, never the key), `EBADREQ` (400, with the
---    server's message), `ENOTFOUND` (404 or unknown model), `ERATELIMIT` (429/529 after the retries),
---    `EHTTP` (5xx after the retries, or another status), `ETIMEDOUT`, `ECONNECT` (after the retries),
---    `EPARSE` (a reply that is not the expected JSON: truncated, wrong content type), `EBUDGET`
---    (a budget is spent: no request is made), `EREPLAY` (mode `replay` and the request is not in
---    the record).
---  - Retried: 408, 409, 429, 500, 502, 503, 504, 529, `ETIMEDOUT`, `ECONNECT`, `EHTTP` transport
---    errors. Not retried: 400, 401, 403, 404, `EPARSE`. A retry waits the reply's `Retry-After`
---    (or `retry-after-ms`) when given, else the backoff; the concurrency slot is not held while
---    waiting. Killing the calling task aborts its transfer and gives its slot back.
---  - Prompt caching (Anthropic): the provider caches a prefix only once a reply to it has begun,
---    and only prefixes of at least ~1024 tokens (2048 for Haiku). To share a prefix among parallel
---    workers, let one call with it finish first, then fan out. OpenAI caches long prefixes by
---    itself; its cached tokens are reported as `cache_read_tokens`.
---@param args table
---@return any
function llm.chat(args) end

---`llm.usage()` → run totals `{calls, failures, input_tokens, output_tokens, cache_read_tokens,
---  cache_write_tokens, cost_usd, http_requests, retries, replayed, by_model = {[model] = {...}}}`.
---  `llm.reset_usage()` zeroes them.
---@return any
function llm.usage() end

---`llm.usage()` → run totals `{calls, failures, input_tokens, output_tokens, cache_read_tokens,
---  cache_write_tokens, cost_usd, http_requests, retries, replayed, by_model = {[model] = {...}}}`.
---  `llm.reset_usage()` zeroes them.
---@return any
function llm.reset_usage() end

---`llm.extract_code(text, lang)` → the code of a fenced block: with `lang`, the last block tagged
---  `lang` (aliases: `py`/`python3` = `python`, `c++` = `cpp`, `cu` = `cuda`), else the last untagged
---  block, else the last block; without `lang`, the last block; `nil` when there is none. An unclosed
---  final fence (a reply cut at `max_tokens`) counts up to the end of the text.
---@param text string
---@param lang? string
---@return any
function llm.extract_code(text, lang) end

---`llm.extract_json(text)` → value, or `nil, "EPARSE: ...", "EPARSE"`. Accepts bare JSON, a
---  ```` ```json ```` fence, or the first balanced `{...}`/`[...]` in prose.
---@param text string
---@return any
function llm.extract_json(text) end

return llm
