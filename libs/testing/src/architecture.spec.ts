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
      expect(architectureViolations([file('apps/generator/src/x.ts', `import { configureApp } from '../../api/src/app.setup';`)])).toEqual([
        expect.stringMatching(/an app imports another app/),
      ]);
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

    it('an import cycle between files inside a lib, named as a chain', () => {
      const violations = architectureViolations([
        file('libs/p/src/a.ts', `import { b } from './b';`),
        file('libs/p/src/b.ts', `import type { c } from './sub';`),
        file('libs/p/src/sub/index.ts', `export { c } from './c';`),
        file('libs/p/src/sub/c.ts', `export { a } from '../a';`),
      ]);
      expect(violations).toEqual(['import cycle between files: libs/p/src/a.ts -> b.ts -> sub/index.ts -> sub/c.ts -> a.ts']);
    });

    it('a file cycle in an app, once, from its smallest name', () => {
      const violations = architectureViolations([
        file('apps/api/src/z.ts', `import { y } from './y';`),
        file('apps/api/src/y.ts', `import { z } from './z.ts';`),
      ]);
      expect(violations).toEqual(['import cycle between files: apps/api/src/y.ts -> z.ts -> y.ts']);
    });

    it('a knot of files by its tightest loops, each once', () => {
      // provider.types re-exports from registry, which imports a type that needs provider.types.
      const violations = architectureViolations([
        file('libs/p/src/types.ts', `export { Route } from './registry';`),
        file('libs/p/src/registry.ts', `import { kind } from './kind';`, `import { T } from './types';`),
        file('libs/p/src/kind.ts', `import { T } from './types';`, `import { batch } from './batch';`),
        file('libs/p/src/batch.ts', `import type { K } from './kind';`),
      ]);
      expect(violations).toEqual([
        'import cycle between files: libs/p/src/batch.ts -> kind.ts -> batch.ts (one of the tightest loops of a knot of 4 files)',
        'import cycle between files: libs/p/src/registry.ts -> types.ts -> registry.ts (one of the tightest loops of a knot of 4 files)',
      ]);
    });

    it('a production file importing a fake', () => {
      expect(
        architectureViolations([
          file('libs/x/src/service.ts', `import { FakeThing } from './thing.fake';`),
          file('libs/x/src/thing.fake.ts', `export class FakeThing {}`),
          file('libs/x/src/index.ts', `export { FakeUpstream } from './fake-upstream';`),
          file('libs/x/src/fake-upstream.ts', ``),
          file('apps/api/src/main.ts', `import { TestApp } from '../../../test/helpers/apps';`),
        ]),
      ).toEqual([
        'libs/x/src/service.ts imports ./thing.fake: production code imports a fake',
        'libs/x/src/index.ts imports ./fake-upstream: production code imports a fake',
        'apps/api/src/main.ts imports ../../../test/helpers/apps: production code imports a fake',
      ]);
    });

    it('a production file importing @app/testing', () => {
      expect(architectureViolations([file('libs/x/src/service.ts', `import { harness } from '@app/testing';`)])).toEqual([
        'libs/x/src/service.ts imports @app/testing: production code imports a fake',
      ]);
    });

    it('nothing in specs, spec helpers and fakes importing fakes', () => {
      expect(
        architectureViolations([
          file('libs/x/src/service.spec.ts', `import { FakeThing } from './thing.fake';`, `import { harness } from '@app/testing';`),
          file('libs/x/src/service.spec-helpers.ts', `import { FakeThing } from './thing.fake';`),
          file('libs/x/src/thing.fake.ts', `import { fakePng } from './fake-upstream';`),
          file('libs/testing/src/fakes/x.fake.ts', `import { harness } from '../harness';`),
          file('apps/api/src/x.e2e-spec.ts', `import { harness } from '@app/testing';`),
        ]),
      ).toEqual([]);
    });

    it('no lib cycle through specs and test support: tests may import test support that imports the lib', () => {
      const sources = [
        file('libs/providers/src/registry.spec.ts', `import { fakeUpstream } from '@app/testing';`),
        file('libs/testing/src/fakes/upstream.fake.ts', `import { ProviderRoute } from '@app/providers';`),
        file('libs/testing/src/harness.ts', `import { ProviderRoute } from '@app/providers';`),
        file('libs/providers/src/upstream.fake.ts', `import { harness } from '@app/testing';`),
      ];
      expect(architectureViolations(sources)).toEqual([]);
      // The same import from a production file of the lib is what breaks a rule: a fake imported.
      expect(
        architectureViolations([...sources, file('libs/providers/src/registry.ts', `import { harness } from '@app/testing';`)]),
      ).toEqual(['libs/providers/src/registry.ts imports @app/testing: production code imports a fake']);
      // Between other libs, a spec's import does not close a cycle that production code does not.
      expect(
        architectureViolations([
          file('libs/a/src/x.ts', `import { b } from '@app/b';`),
          file('libs/b/src/x.spec.ts', `import { a } from '@app/a';`),
        ]),
      ).toEqual([]);
    });

    it('the webhooks lib importing the batches lib', () => {
      expect(architectureViolations([file('libs/webhooks/src/x.ts', `import { batchObject } from '@app/batches';`)])).toEqual([
        expect.stringMatching(/libs\/webhooks must not import @app\/batches/),
      ]);
    });

    it('the generator app loading the batches lib, directly or through a lib', () => {
      expect(architectureViolations([file('apps/generator/src/x.ts', `import { sweep } from '@app/batches';`)])).toEqual([
        'apps/generator loads @app/batches: apps/generator/src/x.ts -> @app/batches',
      ]);
      expect(
        architectureViolations([
          file(
            'apps/generator/src/main.ts',
            `import { GenerationModule } from '@app/generation';`,
            `import { WebhooksModule } from '@app/webhooks';`,
          ),
          file('libs/generation/src/x.ts', `import { TaskRow } from '@app/tasks';`),
          file('libs/webhooks/src/x.ts', `import { events } from '@app/events';`),
          file('libs/events/src/x.ts', `import { batchObject } from '@app/batches';`),
          // A spec does not ship: the generator does not load what it imports.
          file('apps/generator/src/main.spec.ts', `import { BatchesModule } from '@app/batches';`),
        ]),
      ).toEqual(['apps/generator loads @app/batches: apps/generator/src/main.ts -> @app/webhooks -> @app/events -> @app/batches']);
    });

    it('nothing in files that keep the rules', () => {
      expect(
        architectureViolations([
          file('libs/a/src/x.ts', `import { b } from '@app/b';`, `import { y } from './y';`, `const q = 'SELECT id FROM tasks';`),
          file('apps/api/src/x.ts', `import { a } from '@app/a';`, `import { z } from '../z';`),
          // Files that import each other one way only, a folder through its index.
          file('libs/a/src/y.ts', `import { z } from './z';`, `import type { w } from './w';`),
          file('libs/a/src/z.ts', `import { w } from './w';`, `import { q } from './q';`),
          file('libs/a/src/w/index.ts', `export * from './v';`),
          file('libs/a/src/w/v.ts', `import { q } from '../q';`),
          file('libs/a/src/q.ts', `export const q = 1;`),
        ]),
      ).toEqual([]);
    });
  });
});
