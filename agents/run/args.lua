-- Command-line options of the agent scripts, parsed by Debian's lua-argparse (compiled into the
-- binary). A spec maps each long option name to
--   {type = "string"|"number"|"integer"|"boolean", default =, help =, choices = {...},
--    min =, max =, above = (exclusive lower bound), check = fn(value) -> value | nil, why,
--    metavar =, group =, llm = true (an LLM setting: hidden from an LLM-free script's help),
--    complete = fn() -> words (offered by shell completion besides file names: --policy's names)}
--    ["repeat"] = true (the option may be given several times: its value is the list of them)}
-- Every value is converted and checked while parsing, so a bad option stops the script before
-- any work with one line that says what is wrong, what is allowed, and "did you mean" for a typo.
-- Booleans are flags (`--tuner`). Defaults are filled after parsing, so a caller knows which
-- options the command line gave (`opts._given`): --resume keeps the run's own for the rest.
local argparse = require("argparse")
local keys_lib = require("agents.lib.keys")

local M = {}

function M.key(name) return (name:gsub("-", "_")) end

-- distance(a, b) -> the edit distance (insertions, deletions, substitutions)
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a:sub(i, i) == b:sub(j, j) and 0 or 1))
    end
    prev = cur
  end
  return prev[#b]
end

-- suggest(word, candidates) -> the candidate a typo most likely meant (nearest by edit distance,
-- at most 2 edits and fewer than half the word; or the only one it begins), or nil
function M.suggest(word, candidates)
  local best, best_d = nil, math.huge
  local prefixed = {}
  for _, c in ipairs(candidates) do
    local d = distance(word, c)
    if d < best_d then best, best_d = c, d end
    if #word >= 3 and c:sub(1, #word) == word then prefixed[#prefixed + 1] = c end
  end
  if best and best_d <= 2 and best_d * 2 < #word then return best end
  if #prefixed == 1 then return prefixed[1] end
end

-- range_text(s) -> "a whole number >= 1", "a number > 0 and <= 100", ...
local function range_text(s)
  local what = s.type == "integer" and "a whole number" or "a number"
  local lo = s.above ~= nil and ("> " .. s.above) or (s.min ~= nil and (">= " .. s.min)) or nil
  local hi = s.max ~= nil and ("<= " .. s.max) or nil
  if lo and hi then return what .. " " .. lo .. " and " .. hi end
  if lo or hi then return what .. " " .. (lo or hi) end
  return what
end

-- converter(name, s) -> argparse convert function: the value, or nil and a one-line reason
local function converter(name, s)
  return function(raw)
    local v = raw
    if s.type == "number" or s.type == "integer" then
      local n = tonumber(raw)
      local ok = n and n == n and n ~= math.huge and n ~= -math.huge
        and (s.type ~= "integer" or n == math.floor(n))
        and (s.min == nil or n >= s.min) and (s.above == nil or n > s.above) and (s.max == nil or n <= s.max)
      if not ok then return nil, string.format("--%s expects %s, got '%s'", name, range_text(s), raw) end
      v = n
    end
    if s.check then
      local checked, why = s.check(v)
      if checked == nil then return nil, string.format("--%s: %s", name, tostring(why)) end
      v = checked
    end
    return v
  end
end

local function describe(s)
  local text = s.help or ""
  local extra = {}
  if s.choices then extra[#extra + 1] = table.concat(s.choices, "|") end
  if s.default ~= nil and s.type ~= "boolean" then extra[#extra + 1] = "default " .. tostring(s.default) end
  if #extra > 0 then text = text .. " (" .. table.concat(extra, "; ") .. ")" end
  return text
end

-- parser(how, spec) -> the argparse parser of a script. how: {prog, usage, about, epilog,
-- positional (a name: free arguments are allowed), llm_free (hide LLM settings from the help)}
function M.parser(how, spec)
  local stem = how.prog:match("([^/]+)%.lua$") or how.prog
  local p = argparse("kagent_rt_" .. stem:gsub("[^%w]", "_"), how.about)
    :add_help(false)
    :usage("usage: " .. (how.usage or ("kagent-rt " .. how.prog .. " [options]")))
    :help_max_width(100)
  if how.epilog then p:epilog(how.epilog) end
  local groups, order = {}, {}
  for _, name in ipairs(keys_lib.sorted(spec)) do
    local s = spec[name]
    local o
    if s.type == "boolean" then
      o = p:flag("--" .. name)
    else
      o = p:option("--" .. name):args(1):convert(converter(name, s))
      if s["repeat"] then o:count("*") end
      if s.choices then o:choices(s.choices) end
      o:argname("<" .. (s.metavar or (s.choices and "choice") or
        ((s.type == "number" or s.type == "integer") and "n") or name) .. ">")
    end
    o:description(describe(s)):target(M.key(name))
    if how.llm_free and s.llm then o:hidden(true) end
    local g = s.group or "Options"
    if not groups[g] then groups[g] = {}; order[#order + 1] = g end
    table.insert(groups[g], o)
  end
  local help = p:flag("-h --help"):description("show this help and exit")
  local comp = p:option("--completion"):args(1):choices({ "bash", "zsh", "fish" }):argname("<shell>")
    :description("print a shell completion script (bash, zsh or fish) and exit")
  -- groups in the order the spec's metatable lists (`groups`), the others after them by name
  local rank = {}
  for i, g in ipairs((getmetatable(spec) or {}).groups or {}) do rank[g] = i end
  table.sort(order, function(x, y)
    local a, b = rank[x] or math.huge, rank[y] or math.huge
    if a ~= b then return a < b end
    return x < y
  end)
  for _, g in ipairs(order) do p:group(g, unpack(groups[g])) end
  p:group("Help", help, comp)
  p:argument(how.positional or "arguments"):args("*"):hidden(not how.positional):target("_positional")
  return p
end

-- value_after(argv, name) -> the value the command line gave an option (for error messages)
local function value_after(argv, name)
  for i, a in ipairs(argv) do
    if a == name then return argv[i + 1] end
    local v = a:match("^" .. name:gsub("%-", "%%-") .. "=(.*)$")
    if v then return v end
  end
end

-- one_line(err, argv, spec) -> argparse's message as one line, with a "did you mean"
local function one_line(err, argv, spec)
  err = tostring(err):gsub("\nDid you mean.*$", "")
  local unknown = err:match("^unknown option '([^']+)'")
  if unknown then
    local tip = M.suggest(unknown:match("^%-*([^=]*)"), keys_lib.sorted(spec))
    return err .. (tip and ("; did you mean '--" .. tip .. "'?") or "")
  end
  local opt = err:match("^argument for option '([^']+)' must be one of")
  local s = opt and spec[opt:sub(3)]
  if s then
    local given = value_after(argv, opt)
    local tip = given and M.suggest(given, s.choices)
    return string.format("%s must be one of %s, got '%s'%s", opt, table.concat(s.choices, ", "), tostring(given),
      tip and ("; did you mean '" .. tip .. "'?") or "")
  end
  return err
end

-- A value that starts with "-" (a negative number) would be read as an option: it is joined to
-- its option (`--rounds=-1`), so the range check, not "unknown option '-1'", answers.
local function join_negatives(argv, spec)
  local out, i = {}, 1
  while i <= #argv do
    local a, nxt = argv[i], argv[i + 1]
    local s = a:sub(1, 2) == "--" and spec[a:sub(3)]
    if s and s.type ~= "boolean" and nxt and nxt:match("^%-[%d%.]") then
      out[#out + 1] = a .. "=" .. nxt
      i = i + 2
    else
      out[#out + 1] = a
      i = i + 1
    end
  end
  return out
end

-- parse(argv, spec, how) -> opts, or nil and a one-line message. opts has the spec's defaults
-- filled, `_given` (the keys set on the command line), `_positional` (free arguments, when
-- how.positional allows them), and `help = true` or `completion = shell` when asked for.
function M.parse(argv, spec, how)
  how = how or {}
  for _, a in ipairs(argv) do
    if a == "-h" or a == "--help" then return { help = true, _given = {}, _positional = {} } end
  end
  local ok, res = M.parser({ prog = how.prog or "script.lua", positional = how.positional }, spec)
    :pparse(join_negatives(argv, spec))
  if not ok then return nil, one_line(res, argv, spec) end
  local pos = res._positional or {}
  if not how.positional and #pos > 0 then
    for i = 2, #argv do
      local s = argv[i] == pos[1] and argv[i - 1]:sub(1, 2) == "--" and spec[argv[i - 1]:sub(3)]
      if s and s.type == "boolean" then
        return nil, string.format("%s is a flag and takes no value (got '%s')", argv[i - 1], pos[1])
      end
    end
    return nil, string.format("unexpected argument '%s' (options are --name value)", pos[1])
  end
  local opts = { _given = {}, _positional = pos, completion = res.completion }
  for name, s in pairs(spec) do
    local k = M.key(name)
    local v = res[k]
    if s["repeat"] and type(v) == "table" and #v == 0 then v = nil end
    if v ~= nil then
      opts[k], opts._given[k] = v, true
    elseif s.default ~= nil then
      opts[k] = s.default
    end
  end
  return opts
end

-- usage(how, spec) -> the help text of a script
function M.usage(how, spec)
  return (M.parser(how, spec):get_help():gsub("\n+$", ""))
end

-- Completion -------------------------------------------------------------------------------------
-- argparse writes a script for one command; here every script runs under `kagent-rt`, so each
-- entry point's function is registered under its own name and a small dispatcher, the same in
-- every script, hands `kagent-rt <script>.lua ...` to the function of that script.

-- Before a script is named, the dispatchers offer the entry points (@ENTRY@) besides files.
local BASH_DISPATCH = [==[
# after --policy, also the policies in the user's folder now (this file may predate them)
_kagent_rt_user_policies() {
    [[ ${COMP_WORDS[COMP_CWORD-1]} == --policy ]] || return 0
    local f d=${KAGENT_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/kagent-rt}/agents/policies
    for f in "$d"/*.lua; do
        [[ -e $f ]] || continue
        f=${f##*/}; f=${f%.lua}
        [[ $f == "${COMP_WORDS[COMP_CWORD]}"* && " ${COMPREPLY[*]} " != *" $f "* ]] && COMPREPLY+=("$f")
    done
}
# kagent-rt runs many scripts: complete the options of the first *.lua word
_kagent_rt() {
    local i fn
    for (( i = 1; i < COMP_CWORD; i++ )); do
        if [[ "${COMP_WORDS[i]}" == *.lua ]]; then
            fn="_kagent_rt_$(basename "${COMP_WORDS[i]}" .lua)"
            if declare -F "$fn" >/dev/null; then "$fn"; _kagent_rt_user_policies; return 0; fi
        fi
    done
    COMPREPLY=($(compgen -W "@ENTRY@" -- "${COMP_WORDS[COMP_CWORD]}") $(compgen -f -- "${COMP_WORDS[COMP_CWORD]}"))
}
complete -F _kagent_rt -o bashdefault -o default kagent-rt
]==]

local ZSH_DISPATCH = [==[
# kagent-rt runs many scripts: complete the options of the first *.lua word
_kagent_rt() {
  local i fn
  for (( i = 2; i < CURRENT; i++ )); do
    if [[ $words[i] == *.lua ]]; then
      fn=_kagent_rt_${${words[i]:t}%.lua}
      if (( $+functions[$fn] )); then
        shift $(( i - 1 )) words
        (( CURRENT -= i - 1 ))
        $fn
        return
      fi
    fi
  done
  compadd -- @ENTRY@
  _files
}
compdef _kagent_rt kagent-rt
]==]

local FISH_ENTRY = "complete -c kagent-rt -n 'not string match -qr -- \"\\\\.lua\\$\" (commandline -opc)' -a '@ENTRY@'\n"

-- entry_points() -> the shipped and the user's agent scripts, as `kagent-rt` takes them
function M.entry_points()
  local out = {}
  for _, path in ipairs(kagent.files("agents", ".lua")) do out[#out + 1] = "agents/" .. path:match("([^/]+)$") end
  return out
end

-- with_words(text, shell, name, words) -> the completion script with `words` offered for option
-- --name besides files (argparse completes only fixed choices)
local function with_words(text, shell, name, words)
  local w = table.concat(words, " ")
  local opt = ("--" .. name):gsub("%-", "%%-")
  if shell == "bash" then
    return (text:gsub("(\n%s+" .. opt .. "%)\n%s+COMPREPLY=%()(%$%(compgen %-f %-%- \"%$cur\"%))",
      "%1$(compgen -W \"" .. w .. "\" -- \"$cur\") %2"))
  elseif shell == "zsh" then
    return (text:gsub("(\"" .. opt .. "%[[^\n]-%]: :)_files\"", "%1{compadd -- " .. w .. "; _files}\""))
  end
  return (text:gsub("( %-l " .. name:gsub("%-", "%%-") .. " %-r)", "%1 -a '" .. w .. "'"))
end

-- completion(how, spec, shell) -> the completion script of a script for bash, zsh or fish
function M.completion(how, spec, shell)
  local p = M.parser(how, spec)
  local name = p._name
  local stem = how.prog:match("([^/]+)%.lua$") or how.prog
  local text = p["get_" .. shell .. "_complete"](p)
  local entry = table.concat(M.entry_points(), " ")
  if shell == "bash" then
    text = text:gsub("\ncomplete %-F [^\n]*\n*$", "\n") .. "\n" .. BASH_DISPATCH:gsub("@ENTRY@", entry)
  elseif shell == "zsh" then
    text = text:gsub("^#compdef [^\n]*\n", ""):gsub("\n" .. name .. "\n*$", "\n") .. "\n" .. ZSH_DISPATCH:gsub("@ENTRY@", entry)
  else
    -- each line applies only while the command line names this script
    local cond = string.format("-n 'string match -qr -- \"(^|/)%s\\\\.lua\\$\" (commandline -opc)'", stem)
    text = text:gsub("complete %-c " .. name .. " ", "complete -c kagent-rt " .. cond .. " ") .. FISH_ENTRY:gsub("@ENTRY@", entry)
  end
  for n, s in pairs(spec) do
    if s.complete then text = with_words(text, shell, n, s.complete()) end
  end
  return "# " .. shell .. " completion for kagent-rt " .. how.prog .. " (generated by --completion " .. shell .. ")\n" .. text
end

return M
