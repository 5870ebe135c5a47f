// Runs first in every fresh realm, before the script: builds `ctx` and the SDK object from
// the host functions it is given, and puts caps on the built-ins that can allocate without
// bound from a small input. It returns [ctx, sdk]; nothing it defines stays global.
(function (host) {
  'use strict';
  const { call, sleep, log, now, random, cap, jsonDepth, regexExec, regexCompile, countOf, tick, args, maxString, maxArray, maxDepth, maxRecursion } = host;
  const freeze = Object.freeze;
  const isArray = Array.isArray;
  const StringProto = String.prototype;
  const ArrayProto = Array.prototype;
  const apply = Reflect.apply;

  const method = (path) => freeze(function (a) {
    return call(path, a === undefined ? {} : a);
  });
  const namespace = (name) => {
    const methods = Object.create(null);
    return new Proxy(freeze(Object.create(null)), {
      get: (_, m) => (typeof m !== 'string' || m === 'then' || m === 'toJSON')
        ? undefined
        : (methods[m] ??= method(name + '.' + m)),
      set: () => false,
      defineProperty: () => false,
      deleteProperty: () => false,
      setPrototypeOf: () => false,
    });
  };
  // `client.sql(query, params)` is `client.sql.query({ sql: query, params })`; the namespace's
  // other methods stay reachable as `client.sql.<method>`.
  const sqlMethods = Object.create(null);
  const sqlNamespace = new Proxy(freeze(function sql(query, params) {
    return call('sql.query', params === undefined ? { sql: query } : { sql: query, params });
  }), {
    get: (_, m) => (typeof m !== 'string' || m === 'then' || m === 'toJSON')
      ? undefined
      : (sqlMethods[m] ??= method('sql.' + m)),
    set: () => false,
    defineProperty: () => false,
    deleteProperty: () => false,
    setPrototypeOf: () => false,
  });
  const namespaces = Object.create(null);
  namespaces.sql = sqlNamespace;
  const sdk = new Proxy(freeze(Object.create(null)), {
    get: (_, n) => (typeof n !== 'string' || n === 'then' || n === 'toJSON')
      ? undefined
      : (namespaces[n] ??= namespace(n)),
    set: () => false,
    defineProperty: () => false,
    deleteProperty: () => false,
    setPrototypeOf: () => false,
  });
  const ctx = freeze({ sleep, log, now, args });

  // Math.random from the host's randomness.
  Object.defineProperty(Math, 'random', { value: random, writable: false, configurable: false });

  // Built-ins whose output can be far larger than their input.
  const guard = (proto, name, check) => {
    const original = proto[name];
    Object.defineProperty(proto, name, {
      value: freeze({
        [name](...a) {
          tick();
          check(this, a);
          return apply(original, this, a);
        },
      }[name]),
      writable: false,
      configurable: false,
    });
  };
  const str = (n) => { if (n > maxString) cap('string_length'); };
  const arr = (n) => { if (n > maxArray) cap('array_length'); };
  guard(StringProto, 'repeat', (s, [n]) => str(String(s).length * Math.max(0, Number(n) || 0)));
  guard(StringProto, 'padStart', (_, [n]) => str(Number(n) || 0));
  guard(StringProto, 'padEnd', (_, [n]) => str(Number(n) || 0));
  guard(StringProto, 'concat', (s, a) => {
    let n = String(s).length;
    for (const x of a) n += String(x).length;
    str(n);
  });
  const replaceCheck = (s, [pattern, replacement]) => {
    if (typeof replacement !== 'string') return;
    const text = String(s);
    const search = typeof pattern === 'string' ? pattern.length : 1;
    const worst = (text.length / Math.max(1, search) + 1) * (replacement.length + 2);
    if (text.length + worst > maxString) {
      const hits = typeof pattern === 'string' ? countOf(text, pattern) : text.length + 1;
      str(text.length + hits * (replacement.length * 2 + 1));
    }
  };
  // `s.split(sep)` makes one string per piece: a long string split by '' is an array as long.
  guard(StringProto, 'split', (s, [sep, limit]) => {
    if (typeof sep !== 'string') return;
    const text = String(s);
    const pieces = sep === '' ? text.length : countOf(text, sep) + 1;
    arr(limit === undefined ? pieces : Math.min(pieces, Number(limit) >>> 0));
  });
  guard(StringProto, 'replace', replaceCheck);
  guard(StringProto, 'replaceAll', replaceCheck);
  guard(ArrayProto, 'join', (a, [sep]) => {
    const len = Number(a.length) || 0;
    arr(len);
    const s = sep === undefined ? 1 : String(sep).length;
    let n = len * s;
    str(n);
    for (let i = 0; i < len; i++) {
      const x = a[i];
      if (typeof x === 'string') n += x.length;
      else if (isArray(x)) n += Number(x.length) || 0;
      str(n);
    }
  });
  guard(ArrayProto, 'fill', (a, [, start, end]) => {
    const len = Number(a.length) || 0;
    const from = start === undefined ? 0 : Number(start) || 0;
    const to = end === undefined ? len : Number(end) || 0;
    arr(Math.max(to, len) - Math.min(from, 0));
  });
  const from = Array.from;
  Object.defineProperty(Array, 'from', {
    value: freeze(function from_(items, ...rest) {
      tick();
      if (items != null && typeof items === 'object' && !(Symbol.iterator in items)) arr(Number(items.length) || 0);
      return apply(from, this, [items, ...rest]);
    }),
    writable: false,
    configurable: false,
  });
  // Calling a function bound n times nests n native calls: count the chain as recursion.
  const FunctionProto = Function.prototype;
  const bind = FunctionProto.bind;
  const boundDepth = new WeakMap();
  Object.defineProperty(FunctionProto, 'bind', {
    value: freeze(function bind_(...a) {
      const depth = (boundDepth.get(this) || 0) + 1;
      if (depth > maxRecursion) cap('recursion');
      const bound = apply(bind, this, a);
      boundDepth.set(bound, depth);
      return bound;
    }),
    writable: false,
    configurable: false,
  });
  // Deep values overflow the native stack of JSON.stringify: measure depth first, iteratively.
  const stringify = JSON.stringify;
  const depthOf = (v) => {
    const stack = [[v, 1]];
    const seen = new Set();
    let visited = 0;
    while (stack.length) {
      const [x, d] = stack.pop();
      if (x === null || typeof x !== 'object' || seen.has(x)) continue;
      if (d > maxDepth) cap('value_depth');
      seen.add(x);
      if (++visited > maxArray) cap('array_length');
      for (const k of Object.keys(x)) stack.push([x[k], d + 1]);
    }
  };
  Object.defineProperty(JSON, 'stringify', {
    value: freeze(function stringify_(v, replacer, space) {
      tick();
      depthOf(v);
      const out = apply(stringify, JSON, [v, replacer, space]);
      if (typeof out === 'string') str(out.length);
      return out;
    }),
    writable: false,
    configurable: false,
  });
  const parse = JSON.parse;
  Object.defineProperty(JSON, 'parse', {
    value: freeze(function parse_(text, reviver) {
      tick();
      const t = String(text);
      str(t.length);
      if (jsonDepth(t) > maxDepth) cap('value_depth');
      return apply(parse, JSON, [t, reviver]);
    }),
    writable: false,
    configurable: false,
  });
  // Regular expressions: every match goes through `regexExec` (`sandbox::regexp`), a matcher
  // whose steps count against the steps cap, and never through the engine's own matcher. The
  // engine calls a regexp's `exec` for match, matchAll, replace, search, split and test, and
  // would use its own matcher only for a regexp whose `exec` is not callable: so `exec` is
  // fixed on a frozen prototype, and every regexp a script can hold is born non-extensible
  // (no own `exec`, no other prototype): literals compile into __lore_regexp(source, flags),
  // and the RegExp the script sees makes such regexps and refuses subclasses.
  const NativeRegExp = RegExp;
  const RegExpProto = NativeRegExp.prototype;
  const preventExtensions = Object.preventExtensions;
  const construct = Reflect.construct;
  const defineProperty = Object.defineProperty;
  let ScriptRegExp;
  const flagsOf = Object.getOwnPropertyDescriptor(RegExpProto, 'flags').get;
  // Every pattern is compiled by lore's matcher first (`regexCompile`: a SyntaxError for a bad
  // one, a RangeError past its size and nesting limits), so the engine's own compiler only ever
  // sees patterns within those limits.
  const make = (pattern, flags) => {
    let p = pattern;
    let f = flags;
    if (p !== null && typeof p === 'object' && apply(isRegExp, p, [])) {
      if (f === undefined) f = apply(flagsOf, p, []);
      p = apply(sourceOf, p, []);
    }
    p = p === undefined ? '' : String(p);
    f = f === undefined ? '' : String(f);
    regexCompile(p, f);
    return preventExtensions(construct(NativeRegExp, [p, f], ScriptRegExp));
  };
  ScriptRegExp = function RegExp(pattern, flags) {
    if (new.target !== undefined && new.target !== ScriptRegExp) {
      throw new TypeError('RegExp cannot be subclassed in lore scripts');
    }
    // RegExp(re) without `new` and without flags is `re` itself (ECMA-262 22.2.4.1).
    if (new.target === undefined && flags === undefined && pattern !== null
        && typeof pattern === 'object' && pattern.constructor === ScriptRegExp
        && apply(isRegExp, pattern, [])) {
      return pattern;
    }
    return make(pattern, flags);
  };
  const isRegExp = function () {
    try { apply(sourceOf, this, []); return true; } catch { return false; }
  };
  const sourceOf = Object.getOwnPropertyDescriptor(RegExpProto, 'source').get;
  defineProperty(ScriptRegExp, 'prototype', { value: RegExpProto, writable: false, enumerable: false, configurable: false });
  defineProperty(ScriptRegExp, 'length', { value: 2, writable: false, enumerable: false, configurable: true });
  defineProperty(ScriptRegExp, Symbol.species, { get: freeze(function () { return this; }), enumerable: false, configurable: false });
  if (typeof NativeRegExp.escape === 'function') {
    defineProperty(ScriptRegExp, 'escape', { value: NativeRegExp.escape, writable: false, enumerable: false, configurable: false });
  }
  defineProperty(RegExpProto, 'constructor', { value: ScriptRegExp, writable: false, enumerable: false, configurable: false });
  // Annex B `re.compile(pattern, flags)` recompiles in place: through lore's matcher first.
  const compile = RegExpProto.compile;
  if (typeof compile === 'function') {
    defineProperty(RegExpProto, 'compile', {
      value: freeze({ compile(pattern, flags) {
        const made = make(pattern, flags);
        return apply(compile, this, [apply(sourceOf, made, []), apply(flagsOf, made, [])]);
      } }.compile),
      writable: false,
      enumerable: false,
      configurable: false,
    });
  }
  // A string given to match, matchAll or search becomes a regexp inside the built-in: made
  // here instead, so its pattern is checked the same way.
  const patternArg = (name, flags) => {
    const original = StringProto[name];
    defineProperty(StringProto, name, {
      value: freeze({
        [name](regexp) {
          tick();
          const usesOwn = regexp !== null && regexp !== undefined
            && (typeof regexp === 'object' || typeof regexp === 'function')
            && regexp[name === 'matchAll' ? Symbol.matchAll : name === 'match' ? Symbol.match : Symbol.search] !== undefined;
          return apply(original, this, [usesOwn || regexp === undefined ? regexp : make(regexp, flags)]);
        },
      }[name]),
      writable: false,
      configurable: false,
    });
  };
  patternArg('match', undefined);
  patternArg('matchAll', 'g');
  patternArg('search', undefined);
  defineProperty(RegExpProto, 'exec', {
    value: freeze({ exec(string) { return regexExec(this, string); } }.exec),
    writable: false,
    enumerable: false,
    configurable: false,
  });
  freeze(RegExpProto);
  freeze(ScriptRegExp);
  defineProperty(globalThis, 'RegExp', { value: ScriptRegExp, writable: true, enumerable: false, configurable: true });
  defineProperty(globalThis, '__lore_regexp', {
    value: freeze(function __lore_regexp(source, flags) { return make(source, flags); }),
    writable: false,
    enumerable: false,
    configurable: false,
  });
  return [ctx, sdk];
})
