// Runs first in every fresh realm, before the script: builds `ctx` and the SDK object from
// the host functions it is given, and puts caps on the built-ins that can allocate without
// bound from a small input. It returns [ctx, sdk]; nothing it defines stays global.
(function (host) {
  'use strict';
  const { call, sleep, log, now, random, cap, jsonDepth, regexRisk, countOf, tick, args, maxString, maxArray, maxDepth, maxRecursion } = host;
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
  // The regex engine backtracks with no step limit: refuse patterns that can backtrack
  // exponentially, and cap the input. Every match, replace, split and test goes through exec.
  const RegExpProto = RegExp.prototype;
  const exec = RegExpProto.exec;
  const source = Object.getOwnPropertyDescriptor(RegExpProto, 'source').get;
  Object.defineProperty(RegExpProto, 'exec', {
    value: freeze(function exec_(input) {
      const text = String(input);
      str(text.length);
      if (regexRisk(apply(source, this, []))) cap('regex');
      return apply(exec, this, [text]);
    }),
    writable: false,
    configurable: false,
  });
  return [ctx, sdk];
})
