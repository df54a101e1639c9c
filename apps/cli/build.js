// The CLI package's build: tsc, then the repository's `@app/*` aliases become what the package
// has instead: `@app/sdk` the package it is published as, `@kiln/sdk` (a dependency of this
// package, not compiled into it); `@app/prompts-file`, a lib of this repository and no package,
// its own compiled copy in dist/prompts-file/; `kiln mcp` (dist/mcp/) bundled with the MCP SDK
// and zod, as the end of this file says.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const tsc = require.resolve('typescript/bin/tsc');
// The SDK's package build, whose declarations the CLI compiles against (see tsconfig.json's
// paths): the trimmed ones a client of @kiln/sdk gets.
execFileSync(process.execPath, [path.join(__dirname, '../../libs/sdk/build.js')], { stdio: 'inherit' });
const dist = path.join(__dirname, 'dist');
fs.rmSync(dist, { recursive: true, force: true });
// The prompts-file lib first, with declarations the CLI then compiles against (tsconfig.json's
// paths). Its tsconfig has no Node types and no DOM: the lib runs in the browser too.
const promptsFile = path.join(dist, 'prompts-file');
execFileSync(process.execPath, [tsc, '-p', path.join(__dirname, '../../libs/prompts-file/tsconfig.json'), '--outDir', promptsFile], {
  stdio: 'inherit',
});
execFileSync(process.execPath, [tsc, '-p', path.join(__dirname, 'tsconfig.json')], { stdio: 'inherit' });
const REQUIRES = [
  ['require("@app/sdk")', 'require("@kiln/sdk")'],
  ['require("@app/prompts-file")', 'require("./prompts-file/index.js")'],
];
// The CLI's own files, dist/*.js and its folders' (dist/mcp/), whose `./` is one level deeper.
const own = fs
  .readdirSync(dist, { recursive: true })
  .map(String)
  .filter((f) => f.endsWith('.js') && !f.startsWith(`prompts-file${path.sep}`));
for (const file of own) {
  const full = path.join(dist, file);
  const here = '../'.repeat(file.split(path.sep).length - 1) || './';
  let text = fs.readFileSync(full, 'utf8');
  for (const [from, to] of REQUIRES) text = text.replaceAll(from, to.replace('"./', `"${here}`));
  fs.writeFileSync(full, text);
}
// Nothing of the repository's aliases may reach the package (it would fail at its first run).
for (const file of fs
  .readdirSync(dist, { recursive: true })
  .map(String)
  .filter((f) => f.endsWith('.js'))) {
  const left = /require\("(@app\/[^"]*)"\)/.exec(fs.readFileSync(path.join(dist, file), 'utf8'));
  if (left) throw new Error(`dist/${file} still requires ${left[1]}: add it to apps/cli/build.js`);
}
// The lib's declarations served the CLI's compile only (the package ships dist/**/*.js).
for (const file of fs.readdirSync(promptsFile).filter((f) => f.endsWith('.d.ts'))) fs.rmSync(path.join(promptsFile, file));

// `kiln mcp`'s server, bundled into one file with what it uses of @modelcontextprotocol/sdk and
// zod (about 1.5 MB), @kiln/sdk and Node's modules left outside. As dependencies of the package,
// the MCP SDK would bring its HTTP transports' too (express, hono and some 90 packages) to every
// install of the CLI, for a server that only speaks stdio. The bundler is rolldown, the one the
// web app's build (vite) runs on.
const MCP_ENTRY = path.join(dist, 'mcp', 'mcp.server.js');
require('rolldown')
  .build({
    input: MCP_ENTRY,
    platform: 'node',
    external: [/^@kiln\/sdk$/, /^node:/],
    logLevel: 'warn',
    write: false,
    output: { format: 'cjs', exports: 'named' },
  })
  .then(({ output }) => {
    fs.rmSync(path.join(dist, 'mcp'), { recursive: true, force: true });
    fs.mkdirSync(path.join(dist, 'mcp'));
    fs.writeFileSync(MCP_ENTRY, output[0].code);
    const left = [...output[0].code.matchAll(/\brequire\("([^"]+)"\)/g)]
      .map((m) => m[1])
      .filter((m) => !/^(node:|@kiln\/sdk$)/.test(m) && !/^(ajv|ajv-formats)\/dist\//.test(m));
    if (left.length) throw new Error(`dist/mcp/mcp.server.js still requires ${left.join(', ')}: bundle it or make it a dependency`);
  })
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
