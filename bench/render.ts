/**
 * `node dist/bench/render.js <results.json>...`: writes each results file's markdown again
 * beside it, with bench/findings.md as it is now. For findings written after a run (the
 * figures themselves are never touched).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BenchReport, renderMarkdown } from './lib/report';

const findings = fs.readFileSync(path.resolve(__dirname, '..', '..', 'bench', 'findings.md'), 'utf8');
for (const file of process.argv.slice(2)) {
  const report = JSON.parse(fs.readFileSync(file, 'utf8')) as BenchReport;
  report.findings = findings;
  fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  fs.writeFileSync(file.replace(/\.json$/, '.md'), renderMarkdown(report, path.basename(file)));
  process.stdout.write(`${file.replace(/\.json$/, '.md')}\n`);
}
