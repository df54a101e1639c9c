#!/usr/bin/env node
// The `kiln` command (apps/cli), run from the build: `npm run build` first.
const path = require('node:path');
const main = path.join(__dirname, '..', 'dist', 'apps', 'cli', 'src', 'main.js');
let cli;
try {
  cli = require(main);
} catch (err) {
  if (err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes(main)) {
    process.stderr.write('kiln: the command line is not built yet; run `npm run build` in the Kiln checkout first\n');
    process.exit(2);
  }
  throw err;
}
cli.main(process.argv).then((code) => process.stdout.write('', () => process.exit(code)));
