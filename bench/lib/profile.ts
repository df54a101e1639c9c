import * as fs from 'node:fs';
import * as path from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  hitCount?: number;
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples?: number[];
}

export interface FrameShare {
  /** `function (file:line)`, the file relative to the repository or to node_modules. */
  frame: string;
  /** Percent of the busy (non-idle) samples spent in this frame itself. */
  selfPct: number;
}

export interface ProfileSummary {
  file: string;
  /** Busy samples / all samples: how much of the window the process was on CPU. */
  busyPct: number;
  /** Busy samples (about one per millisecond on CPU): how much weight the percentages carry. */
  busySamples: number;
  topFrames: FrameShare[];
  /** Self time grouped by where the code lives: a package, node internals, Kiln, GC. */
  byOrigin: FrameShare[];
}

const SPECIAL = new Set(['(idle)', '(program)', '(garbage collector)', '(root)']);

/** Reads a .cpuprofile and returns its top self-time frames and its self time per package. */
export function summarizeProfile(file: string, repoRoot: string, top = 12): ProfileSummary {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const hits = new Map<number, number>();
  if (profile.samples && profile.samples.length > 0) {
    for (const id of profile.samples) hits.set(id, (hits.get(id) ?? 0) + 1);
  } else {
    for (const n of profile.nodes) hits.set(n.id, n.hitCount ?? 0);
  }
  let total = 0;
  let idle = 0;
  const frames = new Map<string, number>();
  const origins = new Map<string, number>();
  for (const node of profile.nodes) {
    const count = hits.get(node.id) ?? 0;
    if (count === 0) continue;
    total += count;
    const name = node.callFrame.functionName || '(anonymous)';
    if (name === '(idle)') {
      idle += count;
      continue;
    }
    const key = SPECIAL.has(name) ? name : `${name} (${shortUrl(node.callFrame.url, repoRoot)}:${node.callFrame.lineNumber + 1})`;
    frames.set(key, (frames.get(key) ?? 0) + count);
    const origin = SPECIAL.has(name) ? name : originOf(node.callFrame.url, repoRoot);
    origins.set(origin, (origins.get(origin) ?? 0) + count);
  }
  const busy = Math.max(1, total - idle);
  const ranked = (m: Map<string, number>, n: number) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([frame, count]) => ({ frame, selfPct: Math.round((count / busy) * 1000) / 10 }));
  return {
    file: path.basename(file),
    busyPct: total > 0 ? Math.round((busy / total) * 1000) / 10 : 0,
    busySamples: total - idle,
    topFrames: ranked(frames, top),
    byOrigin: ranked(origins, 10),
  };
}

function shortUrl(url: string, repoRoot: string): string {
  const plain = url.replace(/^file:\/\//, '');
  const nm = plain.lastIndexOf('/node_modules/');
  if (nm !== -1) return plain.slice(nm + '/node_modules/'.length);
  if (plain.startsWith(repoRoot)) return path.relative(repoRoot, plain);
  return plain || '(native)';
}

/** `express`, `@nestjs/core`, `node:internal`, `kiln:libs/batches`, `(native)`. */
function originOf(url: string, repoRoot: string): string {
  const plain = url.replace(/^file:\/\//, '');
  const nm = plain.lastIndexOf('/node_modules/');
  if (nm !== -1) {
    const parts = plain.slice(nm + '/node_modules/'.length).split('/');
    return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
  }
  if (plain.startsWith('node:')) return 'node:internal';
  if (plain.startsWith(repoRoot)) {
    const rel = path
      .relative(repoRoot, plain)
      .replace(/^dist\//, '')
      .split('/');
    return `kiln:${rel.slice(0, 2).join('/')}`;
  }
  return plain ? 'other' : '(native)';
}
