import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { Batch, BatchDetail, Kiln, KilnApiError, KilnConnectionError, SDK_VERSION } from '@app/sdk';
import { ExitCode, InterruptedError, UsageError } from './cli.errors';
import { parseDeadline } from './deadline';
import { waitForBatch } from './follow';
import { KeyFlags, keyBody, keyId, keyLine, keyTable } from './keys';
import { readPassword } from './password';
import { progressReporter } from './progress';
import { estimateSubmission, resultOf, submit, SubmitOptions } from './submit';

/*
 * `kiln`, the command line on the SDK (docs/cli.md). Talks to KILN_URL (default
 * http://localhost:8080) with KILN_API_KEY, and `kiln keys` with the holder's session in
 * KILN_SESSION (`kiln login` prints one; nothing is stored on disk); the SDK reads all three.
 */

interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}

const io: Io = {
  out: (text) => process.stdout.write(text.endsWith('\n') ? text : `${text}\n`),
  err: (text) => process.stderr.write(text.endsWith('\n') ? text : `${text}\n`),
};

const positiveInt = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number of at least 1');
  return n;
};

const seedInt = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 2 ** 31 - 1) throw new InvalidArgumentError('expected a whole number from 0 to 2147483647');
  return n;
};

/** Ctrl-C once: stop starting things, record what was done, exit 130. Twice: exit now. */
function interruptSignal(): AbortSignal {
  const controller = new AbortController();
  process.on('SIGINT', () => {
    if (controller.signal.aborted) process.exit(ExitCode.Interrupted);
    io.err('Interrupted: finishing what is in flight and saving state (Ctrl-C again to quit at once)');
    controller.abort(new InterruptedError());
  });
  return controller.signal;
}

function client(): Kiln {
  // Checked here, not left to the SDK: with only KILN_SESSION set it builds a client whose
  // API-key calls throw a TypeError, which would print a stack instead of a usage error.
  if (!process.env.KILN_API_KEY) throw new UsageError('no API key; set KILN_API_KEY (kiln keys and kiln logout take KILN_SESSION)');
  return new Kiln();
}

/** The client of `kiln keys`: the account holder's session, which API keys cannot stand in for. */
function sessionClient(): Kiln {
  if (!process.env.KILN_SESSION)
    throw new UsageError('no session; set KILN_SESSION to a session token: export KILN_SESSION=$(kiln login --email you@example.com)');
  return new Kiln();
}

function print(json: boolean, value: unknown, human: () => string): void {
  io.out(json ? JSON.stringify(value, null, 2) : human());
}

/** The tier an estimate priced: one of the two, or both when the file's lines chose per prompt. */
function tierPhrase(tier: string, windowHours: number | null): string {
  const within = windowHours ? ` within ${windowHours} h` : '';
  if (tier === 'mixed') return `on both tiers (the economy images${within})`;
  return `at the ${tier} tier${within ? ` (every image${within})` : ''}`;
}

/** An economy batch says so, and by when its images are due. */
function tierNote(batch: Batch): string {
  return batch.tier === 'economy'
    ? ` economy${batch.expiresAt && !batch.done ? ` (due by ${new Date(batch.expiresAt).toISOString()})` : ''}`
    : '';
}

/** Credits by resolution: "1K=6 2K=12". */
const prices = (cost: Record<string, number>) =>
  Object.entries(cost)
    .map(([r, c]) => `${r}=${c}`)
    .join(' ');

function batchLine(detail: BatchDetail): string {
  const { batch } = detail;
  const c = batch.counts as typeof batch.counts & { cancelled?: number };
  return (
    `${batch.id}  ${batch.status}${batch.done ? '' : ' (running)'}  ${batch.model}${tierNote(batch)}  ` +
    `${c.succeeded}/${batch.total} succeeded, ${c.failed} failed${c.cancelled ? `, ${c.cancelled} cancelled` : ''}, ${c.pending + c.running} to go  ` +
    `credits ${batch.creditsCharged} charged, ${batch.creditsRefunded} refunded`
  );
}

const FULL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const PREFIX = /^[0-9a-f][0-9a-f-]{3,35}$/i;

/**
 * A batch id from what the user typed: a whole id as it is, or the unique batch of the
 * account whose id starts with the given characters (at least 4; file names carry 8).
 */
async function batchId(kiln: Kiln, given: string): Promise<string> {
  if (FULL_ID.test(given)) return given;
  if (!PREFIX.test(given)) throw new UsageError(`${given} is not a batch id or the start of one (at least 4 of its characters)`);
  const prefix = given.toLowerCase();
  const matches: string[] = [];
  for await (const b of kiln.batches.list({ pageSize: 100 })) {
    if (b.id.startsWith(prefix)) matches.push(b.id);
    if (matches.length > 1)
      throw new UsageError(`${given} is the start of more than one batch (${matches.join(', ')}...): give more of the id`);
  }
  if (matches.length === 0)
    throw new KilnApiError('not_found', `No batch of this account has an id starting with ${given}`, 404, undefined, undefined);
  return matches[0];
}

function exitFor(detail: BatchDetail): ExitCode {
  const r = resultOf(detail);
  return r.succeeded === r.total ? ExitCode.Ok : ExitCode.Incomplete;
}

type SetExit = (code: ExitCode) => void;

export function buildProgram(setExit: SetExit): Command {
  const program = new Command('kiln')
    .description('Kiln from the command line: bulk image generation from a prompts file')
    .version(SDK_VERSION)
    .showHelpAfterError('(kiln --help for usage)')
    .exitOverride();
  // The help lists the commands in the order they are added.
  addModels(program);
  addMe(program);
  addSubmit(program, setExit);
  addStatus(program);
  addWait(program, setExit);
  addDownload(program);
  addCancel(program);
  addLs(program);
  addLogin(program);
  addKeys(program);
  addMcp(program);
  return program;
}

function addModels(program: Command): void {
  program
    .command('models')
    .description('the models: credits per image by resolution on each tier (standard, and economy with its window), aspect ratios')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const catalog = await client().models();
      print(!!opts.json, catalog, () =>
        [
          `${'model'.padEnd(22)} ${'standard'.padEnd(20)} ${'economy (within)'.padEnd(24)} aspect ratios`,
          ...catalog.models.map((m) => {
            const economy = m.economyCreditCost ? `${prices(m.economyCreditCost)} (${m.economyWindowHours} h)` : '-';
            return `${m.key.padEnd(22)} ${prices(m.creditCost).padEnd(20)} ${economy.padEnd(24)} ${m.aspectRatios.join(' ')}`;
          }),
        ].join('\n'),
      );
    });
}

function addMe(program: Command): void {
  program
    .command('me')
    .description("the account, its balance, the plan's limits and this key's usage today")
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const me = await client().me();
      print(!!opts.json, me, () =>
        [
          `${me.user.email} (${me.user.plan}, ${me.user.status})`,
          `balance ${me.credits.balance} credits`,
          `batches: at most ${me.limits.maxImagesPerBatch} images each, ${me.limits.maxConcurrentBatches} at once (${me.limits.activeBatches} running)`,
          `economy batches: ${me.limits.maxConcurrentEconomyBatches} at once (${me.limits.activeEconomyBatches} not done)`,
          `this key: ${me.key.creditsUsedToday} credits today${me.key.creditCapPerDay === null ? '' : ` of ${me.key.creditCapPerDay}`}`,
        ].join('\n'),
      );
    });
}

function addSubmit(program: Command, setExit: SetExit): void {
  program
    .command('submit')
    .description('submit a prompts file (.txt: a prompt a line; .jsonl: a JSON string or {"prompt", options...} a line); resumable')
    .argument('<prompts-file>')
    .option('--model <model>', 'a model key (kiln models); needed unless every .jsonl line names one')
    .option('--ratio <ratio>', 'aspect ratio, e.g. 16:9')
    .addOption(new Option('--resolution <resolution>', 'resolution').choices(['1K', '2K', '4K']))
    .option('--count <n>', 'images per prompt (per reference with --ref-mode each)', positiveInt)
    .option('--ref <files...>', 'reference images, uploaded once')
    .addOption(new Option('--ref-mode <mode>', 'how references pair with prompts (default combined)').choices(['each', 'combined']))
    .option('--note <text>', 'a label shown in the dashboard')
    .option('--seed <n>', 'image n of the file renders with seed + n - 1, so the same command makes the same images', seedInt)
    .addOption(new Option('--format <format>', "the images' format (default png)").choices(['png', 'jpeg', 'webp']))
    .addOption(
      new Option(
        '--tier <tier>',
        'standard (default), or economy: the model\'s economy price, every image within its window (kiln models); a .jsonl line\'s "tier" wins for its prompt',
      ).choices(['standard', 'economy']),
    )
    .option(
      '--deadline <when>',
      "a duration from now (10m, 2h) or an ISO time: each batch's images not started by then are cancelled and refunded (not with economy)",
      (value: string) => parseDeadline(value),
    )
    .option('--estimate', 'price the whole file and exit; charges nothing')
    .option('--partial', 'when the balance or the daily cap cannot cover the whole file, submit the batches they cover instead of refusing')
    .option('--wait', 'wait for every batch to finish')
    .option('--out <dir>', 'download images here as batches finish; the state file goes here too')
    .option('--json', 'print one JSON document on stdout')
    .action(async (file: string, opts: SubmitOptions & { estimate?: boolean; json?: boolean }) => {
      if (opts.estimate) await printEstimate(file, opts);
      else setExit(await runSubmit(file, opts));
    });
}

/** `kiln submit --estimate`: prices the whole file, creates nothing. */
async function printEstimate(file: string, opts: SubmitOptions & { json?: boolean }): Promise<void> {
  const e = await estimateSubmission(client(), file, opts);
  print(!!opts.json, e, () =>
    [
      `${e.prompts} prompts -> ${e.images} images in ${e.batches} batch${e.batches === 1 ? '' : 'es'}`,
      `credits required ${e.creditsRequired} ${tierPhrase(e.tier, e.windowHours)}, balance ${e.balance}${e.affordable ? '' : ' (not enough)'}`,
      ...(e.refusal ? [`would be refused now: ${e.refusal.code}: ${e.refusal.message}`] : []),
    ].join('\n'),
  );
}

/** `kiln submit`: runs the file, prints the summary; the exit code docs/cli.md gives. */
async function runSubmit(file: string, opts: SubmitOptions & { json?: boolean }): Promise<ExitCode> {
  const kiln = client();
  const progress = progressReporter(process.stderr);
  const outcome = await submit(kiln, file, opts, progress, interruptSignal());
  const { images, credits } = outcome;
  print(!!opts.json, outcome, () =>
    [
      outcome.refusal ? `Refused: ${outcome.refusal.code}: ${outcome.refusal.message}` : '',
      `${images.succeeded}/${images.total} images succeeded, ${images.failed} failed, ${images.cancelled} cancelled${images.pending ? `, ${images.pending} not finished` : ''}`,
      `credits charged ${credits.charged}, refunded ${credits.refunded}`,
      `batches: ${outcome.batches.map((b) => b.id ?? '(not created)').join(' ')}`,
      outcome.outDir ? `${outcome.files} new files in ${outcome.outDir}` : '',
      `time ${(outcome.durationMs / 1000).toFixed(1)} s; state in ${outcome.stateFile}`,
      outcome.interrupted ? 'Interrupted: run the same command again to resume.' : '',
    ]
      .filter(Boolean)
      .join('\n'),
  );
  if (outcome.refusal) {
    io.err(`${outcome.refusal.code}: ${outcome.refusal.message}`);
    return ExitCode.Refused;
  }
  if (outcome.interrupted) return ExitCode.Interrupted;
  if (images.succeeded < images.total && (outcome.waited || images.pending === 0)) return ExitCode.Incomplete;
  return ExitCode.Ok;
}

function addStatus(program: Command): void {
  program
    .command('status')
    .description('a batch: status, counts, credits')
    .argument('<id>', 'a batch id, or its first characters (the 8 in file names)')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const kiln = client();
      const detail = await kiln.batches.get(await batchId(kiln, id));
      print(!!opts.json, detail, () => batchLine(detail));
    });
}

function addWait(program: Command, setExit: SetExit): void {
  program
    .command('wait')
    .description('wait for a batch to finish; with --out, download its images')
    .argument('<id>', 'a batch id, or its first characters (the 8 in file names)')
    .option('--out <dir>', 'download the images here')
    .option('--json', 'print JSON')
    .action(async (given: string, opts: { out?: string; json?: boolean }) => {
      const kiln = client();
      const id = await batchId(kiln, given);
      const progress = progressReporter(process.stderr);
      const signal = interruptSignal();
      const detail = await waitForBatch(kiln, id, {
        signal,
        onProgress: (d) => {
          const r = resultOf(d);
          progress.update({
            total: r.total,
            finished: r.succeeded + r.failed + r.cancelled,
            failed: r.failed + r.cancelled,
            credits: r.creditsCharged - r.creditsRefunded,
          });
        },
      });
      progress.stop();
      const files = opts.out ? await kiln.batches.download(id, opts.out, { detail, signal }) : [];
      print(!!opts.json, { ...detail, files: files.map((f) => f.path) }, () =>
        [batchLine(detail), ...(opts.out ? [`${files.length} files in ${opts.out}`] : [])].join('\n'),
      );
      setExit(exitFor(detail));
    });
}

function addDownload(program: Command): void {
  program
    .command('download')
    .description("download a batch's images (files already there are skipped)")
    .argument('<id>', 'a batch id, or its first characters (the 8 in file names)')
    .requiredOption('--out <dir>', 'where to write them')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { out: string; json?: boolean }) => {
      const kiln = client();
      const files = await kiln.batches.download(await batchId(kiln, id), opts.out, { signal: interruptSignal() });
      const fresh = files.filter((f) => !f.skipped).length;
      print(
        !!opts.json,
        { files: files.map((f) => ({ task: f.task.id, path: f.path, skipped: f.skipped })) },
        () => `${fresh} downloaded, ${files.length - fresh} already there, in ${opts.out}`,
      );
    });
}

function addCancel(program: Command): void {
  program
    .command('cancel')
    .description('cancel what has not started (refunded), and what fal or Replicate have queued but not run; other running images finish')
    .argument('<id>', 'a batch id, or its first characters (the 8 in file names)')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const kiln = client();
      const batch = await kiln.batches.cancel(await batchId(kiln, id));
      print(!!opts.json, batch, () => `${batch.id} ${batch.status}; refunded so far ${batch.creditsRefunded}`);
    });
}

function addLs(program: Command): void {
  program
    .command('ls')
    .description('batches, newest first')
    .option('--limit <n>', 'how many (default 20)', positiveInt, 20)
    .option('--json', 'print JSON')
    .action(async (opts: { limit: number; json?: boolean }) => {
      const batches: Batch[] = [];
      for await (const b of client().batches.list({ pageSize: Math.min(100, opts.limit) })) {
        batches.push(b);
        if (batches.length >= opts.limit) break;
      }
      print(
        !!opts.json,
        { batches },
        () =>
          batches
            .map(
              (b) =>
                `${b.id}  ${new Date(b.createdAt).toISOString()}  ${b.status.padEnd(9)} ${b.model}${tierNote(b)}  ${b.counts.succeeded}/${b.total}`,
            )
            .join('\n') || 'no batches',
      );
    });
}

function addLogin(program: Command): void {
  program
    .command('login')
    .description('sign in as the account holder; prints a session token for KILN_SESSION (stores nothing)')
    .option('--email <email>', "the account's email (default: KILN_EMAIL)")
    .option('--json', 'print JSON ({ token, expiresAt })')
    .addHelpText('after', '\nThe password: KILN_PASSWORD, else stdin (a pipe or a file), else typed at the terminal.')
    .action(async (opts: { email?: string; json?: boolean }) => {
      const email = opts.email ?? process.env.KILN_EMAIL;
      if (!email) throw new UsageError('no email; pass --email or set KILN_EMAIL');
      const kiln = await Kiln.login(email, await readPassword());
      const session = { token: kiln.sessionToken!, expiresAt: kiln.sessionExpiresAt! };
      print(!!opts.json, session, () => session.token);
      if (!opts.json) io.err(`session until ${new Date(session.expiresAt).toISOString()}; use it as KILN_SESSION (kiln logout ends it)`);
    });
  program
    .command('logout')
    .description('end the session in KILN_SESSION')
    .action(async () => {
      await sessionClient().logout();
      io.err('session ended');
    });
}

function addKeys(program: Command): void {
  const keys = program
    .command('keys')
    .description("the account's API keys: budgets, models allowlists, revocation (needs KILN_SESSION: kiln login)");
  const limitFlags = (cmd: Command) =>
    cmd
      .option('--budget <credits>', 'credits the key may spend a period (with --period)', positiveInt)
      .option('--period <period>', "the budget's UTC period: day, week (from Monday) or month")
      .option('--models <keys>', 'comma-separated model keys the key may use (kiln models)')
      .option('--cap <credits>', 'a day budget in its older spelling, creditCapPerDay (not with --budget)', positiveInt)
      .option('--scopes <scopes...>', 'what the key may do (default on create: everything)')
      .option('--json', 'print JSON');

  keys
    .command('list')
    .description("the keys, newest first, revoked ones too, with their period's spend")
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const list = await sessionClient().keys.list();
      print(!!opts.json, { keys: list }, () => keyTable(list));
    });

  limitFlags(
    keys.command('create').description('create a key; its secret is printed once: store it').requiredOption('--name <name>'),
  ).action(async (opts: KeyFlags & { name: string; json?: boolean }) => {
    const created = await sessionClient().keys.create({ ...keyBody(opts), name: opts.name });
    print(!!opts.json, created, () =>
      [keyLine(created.key), `secret ${created.secret}`, 'The secret is shown only now: store it.'].join('\n'),
    );
  });

  limitFlags(
    keys
      .command('update')
      .description('change what is given: name, budget, models, cap, scopes')
      .argument('<id>', 'a key id, or its first characters')
      .option('--name <name>', 'a new name'),
  )
    .option('--no-budget', 'remove the budget (and a cap)')
    .option('--all-models', 'allow every model again')
    .option('--no-cap', 'remove the day budget of creditCapPerDay')
    .action(async (given: string, opts: KeyFlags & { json?: boolean }) => {
      const body = keyBody(opts);
      if (Object.keys(body).length === 0) throw new UsageError('nothing to change: give --name, --budget, --models, --cap or --scopes');
      const kiln = sessionClient();
      const key = await kiln.keys.update(await keyId(kiln, given), body);
      print(!!opts.json, { key }, () => keyLine(key));
    });

  keys
    .command('revoke')
    .description('revoke a key: refused from its very next request (revoking again changes nothing)')
    .argument('<id>', 'a key id, or its first characters')
    .option('--json', 'print JSON')
    .action(async (given: string, opts: { json?: boolean }) => {
      const kiln = sessionClient();
      const key = await kiln.keys.revoke(await keyId(kiln, given));
      print(!!opts.json, { key }, () => keyLine(key));
    });
}

function addMcp(program: Command): void {
  program
    .command('mcp')
    .description(
      'serve the tools for agents (Model Context Protocol over stdio): list_models, estimate, generate_images, batch_status, cancel_batch',
    )
    .action(async () => {
      // Loaded on use: the other commands do not pay for the MCP SDK's start-up.
      const { runMcpServer } = await import('./mcp/mcp.server');
      await runMcpServer();
    });
}

export async function main(argv: string[]): Promise<ExitCode> {
  let code = ExitCode.Ok;
  const program = buildProgram((c) => (code = c));
  try {
    await program.parseAsync(argv);
    return code;
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.exitCode === 0 ? ExitCode.Ok : ExitCode.Usage;
    }
    if (err instanceof InterruptedError) {
      io.err('kiln: interrupted');
      return ExitCode.Interrupted;
    }
    if (err instanceof UsageError) {
      io.err(`kiln: ${err.message}`);
      return ExitCode.Usage;
    }
    if (err instanceof KilnConnectionError) {
      io.err(`kiln: cannot reach Kiln: ${err.message}`);
      return ExitCode.Incomplete;
    }
    if (err instanceof KilnApiError) {
      io.err(`kiln: ${err.code}: ${err.message}${err.requestId ? ` (request ${err.requestId})` : ''}`);
      if (err.details) io.err(`  details: ${JSON.stringify(err.details)}`);
      return ExitCode.Refused;
    }
    io.err(`kiln: ${(err as Error)?.stack ?? String(err)}`);
    return ExitCode.Incomplete;
  }
}

if (require.main === module) {
  // Exit once stdout is flushed, without waiting for idle keep-alive sockets to close.
  void main(process.argv).then((code) => process.stdout.write('', () => process.exit(code)));
}
