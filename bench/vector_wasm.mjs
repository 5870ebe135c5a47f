// Runs the vector index comparison compiled to wasm32-unknown-unknown under node (V8, the
// engine of Cloudflare Workers). bench/vector.sh builds the module and calls this.
//
//   node bench/vector_wasm.mjs MODULE.wasm compare|threshold|filters clustered|uniform N QUERIES [lore|lore,hnsw]
import { readFileSync } from "node:fs";

const [file, suite, dist, n, queries, only = "lore,hnsw"] = process.argv.slice(2);
const suites = { compare: 0, threshold: 1, filters: 2 };
const dists = { clustered: 0, uniform: 1 };
if (!(suite in suites) || !(dist in dists)) {
  console.error("usage: node vector_wasm.mjs MODULE.wasm compare|threshold|filters clustered|uniform N QUERIES");
  process.exit(2);
}
let memory;
const decoder = new TextDecoder();
const imports = {
  bench: {
    // Process CPU time, not wall time: the machine is shared (V8's helper threads are idle
    // while the module computes).
    now_ms: () => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1e3;
    },
    emit: (ptr, len) => console.log(decoder.decode(new Uint8Array(memory.buffer, ptr, len))),
  },
};
const module = new WebAssembly.Module(readFileSync(file));
// wasm-bindgen placeholders that lore's dependencies link in; the bench never calls them.
for (const { module: from, name } of WebAssembly.Module.imports(module)) {
  imports[from] ??= {};
  imports[from][name] ??= () => {
    throw new Error(`unexpected call to ${from}.${name}`);
  };
}
const instance = new WebAssembly.Instance(module, imports);
memory = instance.exports.memory;
const rustCv = only.split(",").includes("hnsw") ? 1 : 0;
instance.exports.run(suites[suite], dists[dist], Number(n), Number(queries), rustCv);
console.log(`wasm linear memory at exit: ${(memory.buffer.byteLength / 1e6).toFixed(1)} MB`);
