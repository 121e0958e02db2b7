-- kagent.yaml (src/runtime/lua/bind_yaml.cpp, yaml-cpp): scalars typed by YAML 1.2's core schema,
-- mappings and sequences as kagent.json's tables, errors with the line and column.
local json, yaml = kagent.json, kagent.yaml

describe("yaml.decode", function()
  it("types plain scalars by the core schema; quoted ones stay strings", function()
    local v = assert(yaml.decode([[
int: 42
neg: -7
oct: 0o17
hex: 0x1F
float: 2.5
exp: 1e-3
inf: -.inf
nan: .nan
yes: true
no: FALSE
none: null
tilde: ~
empty:
quoted_int: "42"
quoted_bool: 'true'
tagged: !!str 3
word: beam_search
on: on
version: 1.2.3
]]))
    expect.eq(v.int, 42); expect.eq(v.neg, -7); expect.eq(v.oct, 15); expect.eq(v.hex, 31)
    expect.eq(v.float, 2.5); expect.eq(v.exp, 0.001); expect.eq(v.inf, -math.huge)
    expect.truthy(v.nan ~= v.nan, "NaN")
    expect.eq(v.yes, true); expect.eq(v.no, false)
    expect.eq(v.none, yaml.null); expect.eq(v.tilde, yaml.null); expect.eq(v.empty, yaml.null)
    expect.eq(v.quoted_int, "42"); expect.eq(v.quoted_bool, "true"); expect.eq(v.tagged, "3")
    expect.eq(v.word, "beam_search")
    expect.eq(v.on, "on", "YAML 1.1's on/off/yes/no are strings in 1.2's core schema")
    expect.eq(v.version, "1.2.3")
    expect.eq(yaml.null, json.null)
  end)

  it("gives mappings and sequences (nested, flow or block) that encode as JSON unchanged", function()
    local v = assert(yaml.decode([[
strategy_config:
  models:
    - a
    - b
  nested: {k: [1, {x: y}]}
none: []
base: &b {n: 1}
copy: *b
]]))
    expect.same(v.strategy_config.models, { "a", "b" })
    expect.truthy(json.is_array(v.strategy_config.models))
    expect.eq(v.strategy_config.nested.k[2].x, "y")
    expect.eq(json.encode(v.none), "[]", "an empty sequence stays an array")
    expect.eq(v.copy.n, 1, "an alias is resolved")
    expect.eq(json.encode({ yaml.decode("- 1\n- null\n- x\n") }), '[[1,null,"x"]]')
  end)

  it("returns EPARSE with the line and column of the fault", function()
    for _, c in ipairs({
      { "a: 1\n  b: 2\n", "^EPARSE: 2:%d+: " },
      { "a: 1\nb: [1, 2\n", "^EPARSE: 3:%d+: " },
      { "a: 1\nb: 2\na: 3\n", "^EPARSE: 3:1: the key 'a' is given twice" },
      { "a: b: c\n", "^EPARSE: 1:5: illegal map value" },
      { "a: 1\n\tb: 2\n", "^EPARSE: 2:1: illegal tab" },
      { "a: *nope\n", "^EPARSE: 1:4: the referenced anchor is not defined" },
    }) do
      local v, err, code = yaml.decode(c[1])
      expect.eq(v, nil, c[1]); expect.eq(code, "EPARSE"); expect.match(err, c[2], c[1])
    end
    expect.eq(yaml.decode("# only a comment\n"), yaml.null)
    expect.errors(function() yaml.decode(3) end, "expected a string")
  end)
end)
