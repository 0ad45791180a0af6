// tests/real_node.rs: a consumer that waits in a synchronous pipe read, in JS functions
// V8 compiles (their names come from its jitdump file, node --perf-prof).
const fs = require('fs');
function waitForLine() { const b = Buffer.alloc(64); return fs.readSync(0, b, 0, 64, null); }
function consumer() { let n = 0; for (let i = 0; i < 60; i++) n += waitForLine(); return n; }
console.log(consumer());
