import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { resolveLocalPath } from '@app/storage';
import { sampleRss } from '../lib/children';
import { absolute, FAST_MODEL, prompts, waitAllDone } from '../lib/harness';
import { runLoad } from '../lib/load';
import { BenchAccount } from '../lib/kiln';
import { BenchContext, Figure, ScenarioResult } from '../lib/types';
import { log, round } from '../lib/util';

const IMAGES = 1000;
/** Each stored image is replaced by this many random bytes, so the zip is about 1 GiB. */
const IMAGE_BYTES = 1024 * 1024;
const RSS_GROWTH_TARGET_MB = 100;
/** The concurrent phase: this many archive requests at once, two per account, from slow clients. */
const CONCURRENT = 20;
const CONCURRENT_IMAGES = 100;
const CONCURRENT_IMAGE_BYTES = 512 * 1024;
/** Each slow client takes about this many bytes a second, for CONCURRENT_SECONDS, then leaves. */
const SLOW_CLIENT_BYTES_PER_SEC = 2 * 1024 * 1024;
const CONCURRENT_SECONDS = 15;

/**
 * Archive: GET /v1/batches/{id}/archive of a finished 1,000-image batch, read by one client
 * as fast as it takes the bytes, while the api's resident set is sampled: the zip is
 * streamed, so the api's memory must not grow with the batch.
 */
export async function archive(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack } = ctx;
  const api = stack.api!;
  await stack.liftScalePlanLimits();
  await stack.admin('PATCH', '/plans/scale', { maxImagesPerBatch: IMAGES });
  await stack.routeModel(FAST_MODEL, { type: 'simulated', latencyMs: 0 });
  const account = await stack.createAccount('archive');
  await stack.startGenerator();
  const batch = await stack.createBatch(account, { model: FAST_MODEL, prompts: prompts(IMAGES / 10, 'archive'), countPerCombo: 10 });
  const owners: BenchAccount[] = [];
  const small: { owner: BenchAccount; id: string }[] = [];
  for (let i = 0; i < CONCURRENT / 2; i++) {
    const owner = await stack.createAccount('archive-many');
    owners.push(owner);
    const b = await stack.createBatch(owner, {
      model: FAST_MODEL,
      prompts: prompts(CONCURRENT_IMAGES / 10, `many-${i}`),
      countPerCombo: 10,
    });
    small.push({ owner, id: b.id }, { owner, id: b.id });
  }
  await waitAllDone(stack, [account, ...owners], 300_000);
  await stack.stopGenerator();

  // The simulated provider's images are 64 px; real ones are hundreds of KB to a few MB.
  // Each stored object is overwritten in place (local storage, under DATA_DIR/files) with
  // incompressible bytes, so the zip the api streams is about IMAGES x IMAGE_BYTES.
  const { rows } = await stack.db.query<{ key: string }>(
    `SELECT result_key AS key FROM tasks WHERE batch_id = $1 AND result_key IS NOT NULL`,
    [batch.id],
  );
  if (rows.length !== IMAGES) throw new Error(`expected ${IMAGES} stored images, found ${rows.length}`);
  log(`archive: replacing ${IMAGES} stored images with ${IMAGE_BYTES / 1024} KiB of random bytes each`);
  const digests = new Map<string, string>();
  for (const { key } of rows) {
    const body = randomBytes(IMAGE_BYTES);
    fs.writeFileSync(resolveLocalPath(stack.dataDir, key)!, body);
    digests.set(createHash('sha256').update(body).digest('hex'), key);
  }

  const many = await concurrentArchives(ctx, small);

  const rss = sampleRss(api.pid);
  log(`archive: downloading the zip (about ${round((IMAGES * IMAGE_BYTES) / 2 ** 30, 2)} GiB)`);
  const started = Date.now();
  let download: { status: number; bytes: number; found: number };
  try {
    download = await readZip(`${stack.baseUrl}/v1/batches/${batch.id}/archive`, account.key, digests);
  } finally {
    rss.stop();
  }
  const seconds = (Date.now() - started) / 1000;
  if (download.status !== 200) throw new Error(`the archive answered ${download.status}`);
  const growth = round(rss.peak - rss.before);
  const mb = download.bytes / 2 ** 20;
  const figures: Figure[] = [
    absolute(`api peak RSS growth while streaming (${IMAGES} x ${IMAGE_BYTES / 2 ** 20} MiB)`, 'MB', growth, RSS_GROWTH_TARGET_MB),
    absolute('zip size', 'MB', round(mb)),
    absolute('download time', 's', round(seconds, 2)),
    absolute('throughput', 'MB/s', round(mb / seconds)),
    absolute(`${CONCURRENT} archives at once: api peak RSS growth`, 'MB', many.rssGrowthMb, RSS_GROWTH_TARGET_MB),
    absolute(`${CONCURRENT} archives at once: streamed`, 'requests', many.served),
    absolute(`${CONCURRENT} archives at once: refused (503 + 429, Retry-After)`, 'requests', many.refused),
    {
      metric: `${CONCURRENT} archives at once: another client's GET /v1/me p99`,
      unit: 'ms',
      kiln: many.meP99Ms,
      baseline: many.meBaselineP99Ms,
      baselineLabel: 'no archives (same run)',
      ratio: many.meBaselineP99Ms > 0 ? round(many.meP99Ms / many.meBaselineP99Ms, 2) : null,
    },
  ];
  const notes: string[] = [];
  if (download.found !== IMAGES) notes.push(`Only ${download.found} of the ${IMAGES} images were found byte-identical in the zip.`);
  return {
    id: 'archive',
    title: `Archive: a ${IMAGES}-image batch streamed as one zip`,
    method: [
      `A batch of ${IMAGES} images rendered by the real generator (simulated provider, 0 ms); each stored image was then replaced by ${IMAGE_BYTES / 2 ** 20} MiB of random bytes (local storage), so the zip is about ${round((IMAGES * IMAGE_BYTES) / 2 ** 30, 2)} GiB.`,
      "One client reads GET /v1/batches/{id}/archive as fast as it can, scanning the stream for each image's bytes (SHA-256 of every stored entry checked against the files written).",
      'RSS of the api sampled every 50 ms from /proc during the download; growth is the peak minus the figure just before the request.',
      `Then ${CONCURRENT} archive requests at once (two on each of ${CONCURRENT / 2} accounts, each a ${CONCURRENT_IMAGES}-image batch of ${CONCURRENT_IMAGE_BYTES / 1024} KiB random images), each read by a slow client (about ${SLOW_CLIENT_BYTES_PER_SEC / 2 ** 20} MiB/s) for ${CONCURRENT_SECONDS} s, with the default caps (ARCHIVE_MAX_CONCURRENT 8, ARCHIVE_MAX_PER_ACCOUNT 2): the api's peak RSS growth, how many were streamed and refused, and GET /v1/me p99 of another account (4 connections) against ${CONCURRENT_SECONDS} s of the same load without archives just before.`,
    ],
    figures,
    notes,
    profiles: [],
    details: {
      batchId: batch.id,
      rssBeforeMb: round(rss.before),
      rssPeakMb: round(rss.peak),
      bytes: download.bytes,
      imagesFound: download.found,
      concurrent: many,
    },
  };
}

interface ConcurrentFigures {
  served: number;
  refused: number;
  statuses: Record<string, number>;
  rssGrowthMb: number;
  meP99Ms: number;
  meBaselineP99Ms: number;
}

/** CONCURRENT archive requests at once from slow clients, while another account's GET /v1/me is timed. */
async function concurrentArchives(ctx: BenchContext, requests: { owner: BenchAccount; id: string }[]): Promise<ConcurrentFigures> {
  const { stack } = ctx;
  const api = stack.api!;
  const ids = [...new Set(requests.map((r) => r.id))];
  const { rows } = await stack.db.query<{ key: string }>(
    `SELECT result_key AS key FROM tasks WHERE batch_id = ANY($1::uuid[]) AND result_key IS NOT NULL`,
    [ids],
  );
  for (const { key } of rows) fs.writeFileSync(resolveLocalPath(stack.dataDir, key)!, randomBytes(CONCURRENT_IMAGE_BYTES));
  const reader = await stack.createAccount('archive-me');
  const me = {
    url: `${stack.baseUrl}/v1/me`,
    headers: { authorization: `Bearer ${reader.key}` },
    connections: 4,
    durationSec: CONCURRENT_SECONDS,
  };
  log(`archive: GET /v1/me alone for ${CONCURRENT_SECONDS} s (baseline)`);
  const baseline = await runLoad(me);
  log(`archive: ${requests.length} archives at once from slow clients, GET /v1/me meanwhile`);
  const rss = sampleRss(api.pid);
  const statuses: Record<string, number> = {};
  let load: Awaited<ReturnType<typeof runLoad>>;
  try {
    const downloads = requests.map((r) => slowRead(`${stack.baseUrl}/v1/batches/${r.id}/archive`, r.owner.key, CONCURRENT_SECONDS * 1000));
    [load] = await Promise.all([
      runLoad(me),
      ...downloads.map((d) => d.then((status) => (statuses[status] = (statuses[status] ?? 0) + 1))),
    ]);
  } finally {
    rss.stop();
  }
  return {
    served: statuses['200'] ?? 0,
    refused: (statuses['503'] ?? 0) + (statuses['429'] ?? 0),
    statuses,
    rssGrowthMb: round(rss.peak - rss.before),
    meP99Ms: load.p99Ms,
    meBaselineP99Ms: baseline.p99Ms,
  };
}

/** GETs `url` and reads it at about SLOW_CLIENT_BYTES_PER_SEC for `ms`, then leaves; resolves with the status. */
function slowRead(url: string, key: string, ms: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { authorization: `Bearer ${key}` } }, (res) => {
      const status = res.statusCode ?? 0;
      const started = Date.now();
      let bytes = 0;
      const stop = setTimeout(() => {
        res.destroy();
        resolve(status);
      }, ms);
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        const ahead = bytes / SLOW_CLIENT_BYTES_PER_SEC - (Date.now() - started) / 1000;
        if (ahead > 0) {
          res.pause();
          setTimeout(() => res.resume(), ahead * 1000);
        }
      });
      res.on('end', () => {
        clearTimeout(stop);
        resolve(status);
      });
      res.on('error', () => undefined);
    });
    req.on('error', reject);
  });
}

/**
 * Reads the zip as a stream, finding each stored (not deflated) entry by its local header
 * and hashing its bytes, so the check needs no copy of the whole archive. Returns how many
 * entries matched one of `digests`.
 */
function readZip(url: string, key: string, digests: Map<string, string>): Promise<{ status: number; bytes: number; found: number }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { authorization: `Bearer ${key}` } }, (res) => {
      const scanner = new StoredEntryScanner(digests);
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        scanner.push(chunk);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, found: scanner.found }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

/**
 * Walks a zip's local file headers (PK\x03\x04) in stream order. archiver writes stored
 * entries with a data descriptor, so the header's sizes are zero: an image entry is taken
 * to be IMAGE_BYTES long (what the bench wrote), the manifest is skipped by its name.
 */
class StoredEntryScanner {
  found = 0;
  private buffer = Buffer.alloc(0);
  private hash: ReturnType<typeof createHash> | null = null;
  private left = 0;

  constructor(private readonly digests: Map<string, string>) {}

  push(chunk: Buffer): void {
    let data = chunk;
    while (data.length > 0) {
      if (this.hash) {
        const take = Math.min(this.left, data.length);
        this.hash.update(data.subarray(0, take));
        this.left -= take;
        data = data.subarray(take);
        if (this.left === 0) {
          if (this.digests.has(this.hash.digest('hex'))) this.found++;
          this.hash = null;
        }
        continue;
      }
      this.buffer = Buffer.concat([this.buffer, data]);
      const at = this.buffer.indexOf(LOCAL_HEADER);
      if (at < 0 || this.buffer.length < at + 30) {
        this.buffer = this.buffer.subarray(Math.max(0, this.buffer.length - 64 * 1024));
        return;
      }
      const nameLength = this.buffer.readUInt16LE(at + 26);
      const extraLength = this.buffer.readUInt16LE(at + 28);
      const bodyAt = at + 30 + nameLength + extraLength;
      if (this.buffer.length < bodyAt) return;
      const name = this.buffer.subarray(at + 30, at + 30 + nameLength).toString('utf8');
      data = this.buffer.subarray(bodyAt);
      this.buffer = Buffer.alloc(0);
      if (name.startsWith('images/')) {
        this.hash = createHash('sha256');
        this.left = IMAGE_BYTES;
      }
    }
  }
}

const LOCAL_HEADER = Buffer.from([0x50, 0x4b, 0x03, 0x04]);
