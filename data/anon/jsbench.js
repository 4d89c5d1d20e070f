// Run as: NODE_PATH=<dir>/node_modules node jsbench.js, after `npm install typescript@5.6 acorn@8 terser@5` in <dir>.
// web-tooling-benchmark-like run: real JS tools (acorn, terser, typescript) over real inputs
// (npm's own sources and terser's own bundle), each repeated; heap-heavy, allocation-churning.
const fs = require("fs"), path = require("path");
const acorn = require("acorn"), terser = require("terser"), ts = require("typescript");
const npmLib = "/usr/lib/node_modules/npm/lib";
function walk(d, out) { for (const f of fs.readdirSync(d)) { const p = path.join(d, f);
  const st = fs.statSync(p); if (st.isDirectory()) walk(p, out); else if (p.endsWith(".js")) out.push(p); } return out; }
const files = walk(npmLib, []).slice(0, 80).map(p => fs.readFileSync(p, "utf8"));
const big = fs.readFileSync(require.resolve("terser")  /* dist/bundle.min.js, terser itself */, "utf8");
(async () => {
  for (let it = 0; it < 2; it++) {
    let n = 0;
    for (const src of files) n += acorn.parse(src, {ecmaVersion: "latest", sourceType: "script", allowHashBang: true,
      allowReturnOutsideFunction: true, allowAwaitOutsideFunction: true}).body.length;
    for (const src of files.slice(0, 40)) n += (await terser.minify(src, {compress: true, mangle: true})).code.length;
    n += (await terser.minify(big)).code.length;
    for (const src of files) n += ts.transpileModule(src, {compilerOptions: {target: ts.ScriptTarget.ES5}}).outputText.length;
    console.log("iteration", it, n);
  }
})();
