import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { UsageError } from './cli.errors';

export const STATE_FILE = '.kiln-submit.json';

/** What one batch of a submission came to, once it was done. */
export interface ChunkResult {
  status: string;
  total: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  creditsCharged: number;
  creditsRefunded: number;
}

export interface ChunkState {
  /** Which option set of the file (a plan group); absent in state files from before groups: 0. */
  group?: number;
  /** Prompts [first, first + count) of the group (of the file when there is one group). */
  first: number;
  count: number;
  /** Images the batch makes (count x images per prompt). */
  images: number;
  idempotencyKey: string;
  batchId: string | null;
  result: ChunkResult | null;
  downloaded: boolean;
}

export interface SubmissionState {
  file: string;
  startedAt: number;
  /** Unix ms: the --deadline of the run that started the submission, sent with each of its batches. */
  deadline?: number;
  /** Reference file content hash -> uploaded URL, so a re-run sends the same body. */
  refs: Record<string, string>;
  chunks: ChunkState[];
}

interface StateFile {
  version: 1;
  submissions: Record<string, SubmissionState>;
}

/**
 * The submit command's memory, in `<out>/.kiln-submit.json`: per submission (keyed by a hash
 * of the prompts file and the options) its batches, their idempotency keys and what is done.
 * Written whole to a temporary file and renamed, so a crash never leaves half a file.
 */
export class SubmitStateStore {
  readonly file: string;
  private data: StateFile;

  constructor(dir: string) {
    this.file = path.join(dir, STATE_FILE);
    this.data = this.read();
  }

  get(fingerprint: string): SubmissionState | undefined {
    return this.data.submissions[fingerprint];
  }

  put(fingerprint: string, submission: SubmissionState): void {
    this.data.submissions[fingerprint] = submission;
    this.save();
  }

  save(): void {
    mkdirSync(path.dirname(this.file), { recursive: true });
    const tmp = `${this.file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(this.data, null, 2) + '\n');
    renameSync(tmp, this.file);
  }

  private read(): StateFile {
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch {
      return { version: 1, submissions: {} };
    }
    try {
      const data = JSON.parse(text) as StateFile;
      if (data.version === 1 && typeof data.submissions === 'object' && data.submissions) return data;
    } catch {
      // Reported below.
    }
    throw new UsageError(`${this.file} is not a state file this kiln can read; move it away to start over`);
  }
}
