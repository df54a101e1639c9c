import * as path from 'node:path';
import { architectureViolations, readSources, SourceFile } from './architecture';

const file = (p: string, ...lines: string[]): SourceFile => ({ path: p, text: lines.join('\n') });
const tasksWrite = (verb: string) => `await db.query(\`${verb} tasks SET status = 'failed'\`);`;

describe('architecture', () => {
  it('the repository keeps its layering rules', () => {
    // Less this file, whose examples below break the rules on purpose.
    const sources = readSources(path.resolve(__dirname, '../../..')).filter((s) => s.path !== 'libs/testing/src/architecture.spec.ts');
    expect(sources.length).toBeGreaterThan(100);
    expect(sources.some((s) => s.path === 'libs/tasks/src/task-state.store.ts')).toBe(true);
    expect(architectureViolations(sources)).toEqual([]);
  });

  describe('finds', () => {
    it('a lib importing an app', () => {
      expect(architectureViolations([file('libs/a/src/x.ts', `import { ApiModule } from '../../../apps/api/src/api.module';`)])).toEqual([
        expect.stringMatching(/a lib imports an app/),
      ]);
    });

    it('an app importing another app', () => {
      expect(
        architectureViolations([file('apps/generator/src/x.ts', `import { configureApp } from '../../api/src/app.setup';`)]),
      ).toEqual([expect.stringMatching(/an app imports another app/)]);
    });

    it('a lib reaching into another lib past its index', () => {
      expect(architectureViolations([file('libs/a/src/x.ts', `import { y } from '../../b/src/y';`)])).toEqual([
        expect.stringMatching(/not through the lib's @app\/b index/),
      ]);
      expect(architectureViolations([file('apps/api/src/x.ts', `import { y } from '@app/b/y';`)])).toEqual([
        expect.stringMatching(/not through the lib's @app\/b index/),
      ]);
    });

    it('an import cycle between libs, however long', () => {
      const violations = architectureViolations([
        file('libs/a/src/x.ts', `import { b } from '@app/b';`),
        file('libs/b/src/x.ts', `export { c } from '@app/c';`),
        file('libs/c/src/x.ts', `import type { a } from '@app/a';`),
      ]);
      expect(violations).toEqual(['import cycle between libs: a -> b -> c -> a']);
    });

    it('the generation lib importing the batches lib', () => {
      expect(architectureViolations([file('libs/generation/src/x.ts', `import { BatchesModule } from '@app/batches';`)])).toEqual([
        expect.stringMatching(/libs\/generation must not import @app\/batches/),
      ]);
    });

    it('a write of the tasks table outside libs/tasks', () => {
      const violations = architectureViolations([
        file('libs/generation/src/x.ts', tasksWrite('UPDATE')),
        file('apps/api/src/y.ts', `await m.query(\`INSERT\n  INTO tasks (id) VALUES ($1)\`);`),
        file('libs/tasks/src/z.ts', tasksWrite('UPDATE')),
      ]);
      expect(violations).toEqual([
        'libs/generation/src/x.ts writes the tasks table; only libs/tasks may',
        'apps/api/src/y.ts writes the tasks table; only libs/tasks may',
      ]);
    });

    it('a write of the batches table outside libs/tasks', () => {
      const violations = architectureViolations([
        file('libs/generation/src/x.ts', `await db.query(\`UPDATE batches SET preview_url = NULL\`);`),
        file('libs/batches/src/y.ts', `await m.query(\`INSERT INTO batches (id) VALUES ($1)\`);`),
        file('libs/accounts/src/w.ts', `await m.query(\`DELETE FROM batches WHERE account_id = $1\`);`),
        file('libs/tasks/src/z.ts', `await m.query(\`UPDATE batches SET version = version + 1\`);`),
        file('libs/accounts/src/v.ts', `await m.query(\`SELECT count(*) FROM batches\`);`),
      ]);
      expect(violations).toEqual([
        'libs/generation/src/x.ts writes the batches table; only libs/tasks may',
        'libs/batches/src/y.ts writes the batches table; only libs/tasks may',
        'libs/accounts/src/w.ts writes the batches table; only libs/tasks may',
      ]);
    });

    it('nothing in files that keep the rules', () => {
      expect(
        architectureViolations([
          file('libs/a/src/x.ts', `import { b } from '@app/b';`, `import { y } from './y';`, `const q = 'SELECT id FROM tasks';`),
          file('apps/api/src/x.ts', `import { a } from '@app/a';`, `import { z } from '../z';`),
        ]),
      ).toEqual([]);
    });
  });
});
