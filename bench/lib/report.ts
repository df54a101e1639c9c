import * as fs from 'node:fs';
import * as path from 'node:path';
import { MachineInfo } from './machine';
import { Figure, RunOptions, ScenarioResult } from './types';

export interface BenchReport {
  generatedAt: string;
  command: string;
  kind: 'full' | 'partial';
  durationSec: number;
  machine: MachineInfo;
  options: Omit<RunOptions, 'outDir'>;
  /** Other CPU-heavy work seen on the machine while the bench ran. */
  concurrentWork: string[];
  scenarios: ScenarioResult[];
  notes: string[];
  /** bench/findings.md: the hand-written analysis of the shortfalls (profiles, experiments, fixes). */
  findings: string | null;
}

export function writeReport(report: BenchReport, dir: string, basename: string): { json: string; md: string } {
  fs.mkdirSync(dir, { recursive: true });
  const json = path.join(dir, `${basename}.json`);
  const md = path.join(dir, `${basename}.md`);
  fs.writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
  fs.writeFileSync(md, renderMarkdown(report, `${basename}.json`));
  return { json, md };
}

export function renderMarkdown(r: BenchReport, jsonName = 'latest.json'): string {
  const m = r.machine;
  const out: string[] = [];
  out.push('# Kiln benchmarks', '');
  out.push(
    `Generated ${r.generatedAt} by \`${r.command}\` (${r.kind} run, ${Math.round(r.durationSec)} s). ` +
      `Commit \`${m.gitCommit}\`${m.gitUncommitted ? ` plus ${m.gitUncommitted} uncommitted file(s)` : ''}. ` +
      `Raw figures, every round and the CPU profiles' summaries: [${jsonName}](${jsonName}).`,
    '',
  );
  out.push('## Machine', '');
  out.push('| CPU | Cores | Memory | Kernel | Node | PostgreSQL | Redis | Load at start (1/5/15 min) |');
  out.push('|---|---|---|---|---|---|---|---|');
  out.push(
    `| ${m.cpuModel} | ${m.cores} | ${m.memoryGb} GB | ${m.kernel} | ${m.node} | ${m.postgres} | ${m.redis} | ${m.loadAverageAtStart.join(' / ')} |`,
    '',
  );
  out.push('## Results', '');
  out.push(
    'Ratio = Kiln / baseline (or / ideal, / limit). For throughput higher is better; for latency, wall time and memory lower is better. ' +
      'Each baseline ran in the same run, on the same PostgreSQL and Redis.',
    '',
  );
  out.push('| Scenario | Metric | Kiln | Baseline | Ratio | Target | Met |');
  out.push('|---|---|---:|---:|---:|---|---|');
  for (const s of r.scenarios) {
    if (s.error) {
      out.push(`| ${s.id} | failed: ${escapeCell(s.error)} | | | | | |`);
      continue;
    }
    for (const f of s.figures) out.push(figureRow(s.id, f));
  }
  out.push('');
  if (r.concurrentWork.length > 0) {
    out.push(
      `**Noise:** other CPU-heavy work ran on the machine during this run (${r.concurrentWork.length} process(es), e.g. \`${escapeCell(r.concurrentWork[0])}\`); absolute figures are low, the same-run ratios less affected.`,
      '',
    );
  }
  if (r.notes.length > 0) {
    out.push('## Notes', '');
    for (const n of r.notes) out.push(`- ${n}`);
    out.push('');
  }
  if (r.findings) {
    // Demoted one level so its headings sit under this document's.
    out.push(r.findings.trim().replace(/^(#+) /gm, '#$1 '), '');
  }
  for (const s of r.scenarios) {
    out.push(`## ${s.title}`, '');
    if (s.error) out.push(`Failed: \`${s.error}\``, '');
    for (const line of s.method) out.push(`- ${line}`);
    for (const n of s.notes) out.push(`- **Note:** ${n}`);
    out.push('');
    for (const p of s.profiles) {
      out.push(
        `CPU profile \`${path.basename(p.file)}\` (on CPU ${p.busyPct}% of the window, ${p.busySamples} samples). Self time by origin: ${p.byOrigin.map((o) => `${o.frame} ${o.selfPct}%`).join(', ')}.`,
        '',
      );
      out.push('| Top frames (self time, % of busy samples) | % |', '|---|---:|');
      for (const f of p.topFrames) out.push(`| \`${escapeCell(f.frame)}\` | ${f.selfPct} |`);
      out.push('');
    }
  }
  return `${out.join('\n').trimEnd()}\n`;
}

function figureRow(scenario: string, f: Figure): string {
  const fmt = (v: number | null) => (v === null || Number.isNaN(v) ? '' : v.toLocaleString('en-US', { maximumFractionDigits: 2 }));
  const unit = f.unit === 'ms' || f.unit === 's' || f.unit === 'MB' ? ` ${f.unit}` : '';
  const baseline =
    f.baseline === null ? (f.baselineLabel ?? '') : `${fmt(f.baseline)}${unit}${f.baselineLabel ? ` (${f.baselineLabel})` : ''}`;
  const met = f.met === undefined ? '' : f.met ? 'yes' : '**no**';
  return `| ${scenario} | ${f.metric} | ${fmt(f.kiln)}${unit} | ${baseline} | ${fmt(f.ratio)} | ${f.target ?? ''} | ${met} |`;
}

function escapeCell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}
