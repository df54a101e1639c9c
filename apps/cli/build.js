// The CLI package's build: tsc, then the repository's `@app/sdk` alias becomes the package
// it is published as, `@kiln/sdk` (a dependency of this package, not compiled into it).
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const tsc = require.resolve('typescript/bin/tsc');
// The SDK's package build, whose declarations the CLI compiles against (see tsconfig.json's
// paths): the trimmed ones a client of @kiln/sdk gets.
execFileSync(process.execPath, [path.join(__dirname, '../../libs/sdk/build.js')], { stdio: 'inherit' });
const dist = path.join(__dirname, 'dist');
fs.rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', path.join(__dirname, 'tsconfig.json')], { stdio: 'inherit' });
for (const file of fs.readdirSync(dist).filter((f) => f.endsWith('.js'))) {
  const full = path.join(dist, file);
  fs.writeFileSync(full, fs.readFileSync(full, 'utf8').replaceAll('require("@app/sdk")', 'require("@kiln/sdk")'));
}
