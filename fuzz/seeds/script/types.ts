enum C { A, B }
interface P { a: number }
const p: P = { a: C.B };
return [1,2,3].map((x: number) => x * p.a).join(',');