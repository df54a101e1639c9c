// Validates Kubernetes objects (YAML documents, from the files given or stdin) against the
// schemas of the pinned npm packages kubernetes-models (the core API) and
// @kubernetes-models/keda (KEDA's CRDs), offline. Prints one JSON line per object
// ({"kind","name","errors"}); exits 1 when any object is invalid or of an unknown kind.
// An ES module because the model packages are ES modules only; test/deploy-kubernetes.e2e-spec.ts runs it.
import { readFileSync } from 'node:fs';
import yaml from 'js-yaml';

/** The package folder of an apiVersion's models: v1 (core), apps/v1, keda.sh/v1alpha1. */
function modelsFor(apiVersion) {
  if (apiVersion.startsWith('keda.sh/')) return `@kubernetes-models/keda/${apiVersion}`;
  return `kubernetes-models/${apiVersion}`;
}

const files = process.argv.slice(2);
const text = files.length ? files.map((f) => readFileSync(f, 'utf8')).join('\n---\n') : readFileSync(0, 'utf8');
const objects = yaml.loadAll(text).filter((doc) => doc && typeof doc === 'object');
let failed = false;
for (const object of objects) {
  const name = `${object.kind}/${object.metadata?.name}`;
  let errors = [];
  try {
    const models = await import(modelsFor(String(object.apiVersion)));
    const Model = models[object.kind];
    if (!Model) throw new Error(`no schema for ${object.apiVersion} ${object.kind}`);
    new Model(object).validate();
  } catch (err) {
    errors = (err.errors ?? [err]).map((e) => (e.instancePath !== undefined ? `${e.instancePath} ${e.message}` : e.message));
  }
  if (errors.length) failed = true;
  console.log(JSON.stringify({ apiVersion: object.apiVersion, kind: object.kind, name, errors }));
}
if (objects.length === 0) {
  console.log(JSON.stringify({ errors: ['no objects'] }));
  failed = true;
}
process.exit(failed ? 1 : 0);
