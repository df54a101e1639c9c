import { InterruptedError, UsageError } from './cli.errors';

/**
 * The password of `kiln login`: KILN_PASSWORD, else stdin when it is a pipe or a file (one
 * line; the final newline is not part of it), else typed at the terminal without echo. Never
 * a flag: a flag's value shows in `ps` and in the shell's history.
 */
export async function readPassword(stdin: NodeJS.ReadStream = process.stdin): Promise<string> {
  const fromEnv = process.env.KILN_PASSWORD;
  if (fromEnv) return fromEnv;
  const password = stdin.isTTY ? await typed(stdin) : await piped(stdin);
  if (!password) throw new UsageError('no password: type it, pipe it on stdin or set KILN_PASSWORD');
  return password;
}

async function piped(stdin: NodeJS.ReadStream): Promise<string> {
  let text = '';
  stdin.setEncoding('utf8');
  for await (const chunk of stdin) text += chunk as string;
  return text.replace(/\r?\n$/, '');
}

function typed(stdin: NodeJS.ReadStream): Promise<string> {
  process.stderr.write('Password: ');
  stdin.setRawMode(true);
  stdin.setEncoding('utf8');
  stdin.resume();
  return new Promise((resolve, reject) => {
    let value = '';
    const finish = () => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write('\n');
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') {
          finish();
          return resolve(value);
        }
        if (ch === '\u0003') {
          finish();
          return reject(new InterruptedError());
        }
        value = ch === '\u007f' || ch === '\b' ? value.slice(0, -1) : value + ch;
      }
    };
    stdin.on('data', onData);
  });
}
