#!/usr/bin/env node
// The `kiln` command of the @kiln/cli package (its build is dist/).
require('../dist/main.js')
  .main(process.argv)
  .then((code) => process.stdout.write('', () => process.exit(code)));
