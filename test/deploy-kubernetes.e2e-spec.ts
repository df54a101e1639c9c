import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as yaml from 'js-yaml';
import { buildConfig, knownVariables, SECRET_VARIABLES } from '@app/config';
import { KilnMetrics } from '@app/metrics';

/**
 * deploy/kubernetes, checked offline: the example overlay rendered by `kubectl kustomize`
 * (Debian's kubernetes-client, which scripts/test.sh installs when kubectl is missing; its
 * kubectl 1.20 carries the oldest kustomize the manifests are written for), every object
 * validated against the schemas of the pinned kubernetes-models packages
 * (scripts/validate-kubernetes.mjs), and what the manifests say about Kiln held against Kiln:
 * its variables, its probe paths and ports, its images, its drain.
 */
const ROOT = path.resolve(__dirname, '..');
const DEPLOY = path.join(ROOT, 'deploy/kubernetes');
const KUBECTL = process.env.KILN_KUBECTL || 'kubectl';

type K8sObject = any;

function render(dir: string): K8sObject[] {
  let out: string;
  try {
    out = execFileSync(KUBECTL, ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
  } catch (err) {
    throw new Error(
      `${KUBECTL} kustomize ${dir} failed (no kubectl? npm test installs Debian's kubernetes-client): ${(err as Error).message}`,
      { cause: err },
    );
  }
  return yaml.loadAll(out).filter((o): o is K8sObject => !!o);
}

const objects = render(path.join(DEPLOY, 'overlays/example'));
const base = render(path.join(DEPLOY, 'base'));
const keda = yaml.load(fs.readFileSync(path.join(DEPLOY, 'extras/keda-scaledobject.yaml'), 'utf8')) as K8sObject;
const find = (kind: string, name: string, from: K8sObject[] = objects): K8sObject => {
  const o = from.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind}/${name} in the rendering`);
  return o;
};
const workloads = objects.filter((o) => o.kind === 'Deployment' || o.kind === 'Job');
const podSpec = (o: K8sObject) => o.spec.template.spec;
const containers = (o: K8sObject): K8sObject[] => podSpec(o).containers;

/** Every variable a container gets: its env and the ConfigMaps of its envFrom. */
function envOf(c: K8sObject): Map<string, string | undefined> {
  const env = new Map<string, string | undefined>();
  for (const from of c.envFrom ?? []) {
    const data = find('ConfigMap', from.configMapRef.name).data ?? {};
    for (const [k, v] of Object.entries(data)) env.set(k, String(v));
  }
  for (const e of c.env ?? []) env.set(e.name, e.value);
  return env;
}

/** The configuration Kiln makes of a container's variables, with stand-ins for the Secret's files (the cluster's). */
function kilnConfigOf(c: K8sObject) {
  const plain = Object.fromEntries([...envOf(c)].filter(([n]) => !n.endsWith('_FILE')));
  return buildConfig({ ...plain, ADMIN_TOKEN: 'x'.repeat(32), MINIO_ACCESS_KEY: 'k', MINIO_SECRET_KEY: 's' });
}

describe('deploy/kubernetes', () => {
  it('renders every object the base declares, in the namespace of the overlay, and each is valid against the pinned schemas', () => {
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual(base.map((o) => `${o.kind}/${o.metadata.name}`).sort());
    expect(objects.every((o) => o.metadata.namespace === 'kiln')).toBe(true);
    const rendered = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-k8s-')), 'rendered.yaml');
    fs.writeFileSync(rendered, objects.map((o) => yaml.dump(o)).join('---\n'));
    let out: string;
    try {
      out = execFileSync(
        process.execPath,
        [path.join(ROOT, 'scripts/validate-kubernetes.mjs'), rendered, path.join(DEPLOY, 'extras/keda-scaledobject.yaml')],
        { encoding: 'utf8', cwd: ROOT },
      );
    } catch (err) {
      out = (err as { stdout?: string }).stdout ?? String(err);
    } finally {
      fs.rmSync(path.dirname(rendered), { recursive: true, force: true });
    }
    const results = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(results.filter((r) => r.errors.length)).toEqual([]);
    expect(results).toHaveLength(objects.length + 1);
  });

  it('the validator refuses an invalid object (a port that is not a number)', () => {
    const deployment = structuredClone(find('Deployment', 'kiln-api'));
    containers(deployment)[0].ports[0].containerPort = 'eighty';
    let status = 0;
    try {
      execFileSync(process.execPath, [path.join(ROOT, 'scripts/validate-kubernetes.mjs')], {
        input: yaml.dump(deployment),
        encoding: 'utf8',
        cwd: ROOT,
        stdio: ['pipe', 'pipe', 'pipe'],
      });
    } catch (err) {
      status = (err as { status: number }).status;
    }
    expect(status).toBe(1);
  });

  it('sets only variables libs/config knows, and every *_FILE names a key of a mounted Secret', () => {
    const known = new Set(knownVariables());
    const secretFiles = new Set(SECRET_VARIABLES.map((n) => `${n}_FILE`));
    const unknown: string[] = [];
    const unmounted: string[] = [];
    for (const w of workloads) {
      for (const c of containers(w)) {
        for (const [name, value] of envOf(c)) {
          if (known.has(name)) continue;
          if (!secretFiles.has(name) && !/_API_KEY_FILE$/.test(name)) {
            unknown.push(`${w.metadata.name}: ${name}`);
            continue;
          }
          // The file: under a mount of a Secret volume that holds that key.
          const mount = (c.volumeMounts ?? []).find((m: K8sObject) => value?.startsWith(`${m.mountPath}/`));
          const volume = mount && podSpec(w).volumes.find((v: K8sObject) => v.name === mount.name);
          const key = value?.slice(mount?.mountPath.length + 1);
          const holds = volume?.secret && (!volume.secret.items || volume.secret.items.some((i: K8sObject) => i.path === key));
          if (!holds) unmounted.push(`${w.metadata.name}: ${name}=${value}`);
        }
      }
    }
    expect(unknown).toEqual([]);
    expect(unmounted).toEqual([]);
    // And the configuration they make is one Kiln accepts.
    for (const w of workloads) for (const c of containers(w)) expect(() => kilnConfigOf(c)).not.toThrow();
  });

  it("probes the api's /healthz and /readyz on its PORT, and the generator's on GENERATOR_HEALTH_PORT", () => {
    const apiRoutes = fs.readFileSync(path.join(ROOT, 'apps/api/src/health/health.controller.ts'), 'utf8');
    const generatorRoutes = fs.readFileSync(path.join(ROOT, 'apps/generator/src/health.server.ts'), 'utf8');
    const served = {
      'kiln-api': (p: string) => apiRoutes.includes(`@Get('${p.slice(1)}')`),
      'kiln-generator': (p: string) => generatorRoutes.includes(`path === '${p}'`),
    };
    for (const [name, portVariable] of [
      ['kiln-api', 'PORT'],
      ['kiln-generator', 'GENERATOR_HEALTH_PORT'],
    ] as const) {
      const c = containers(find('Deployment', name))[0];
      const port = Number(envOf(c).get(portVariable));
      expect(port).toBeGreaterThan(0);
      const probes = [c.startupProbe, c.livenessProbe, c.readinessProbe];
      expect(probes.every(Boolean)).toBe(true);
      expect(probes.map((p) => p.httpGet.path)).toEqual(['/healthz', '/healthz', '/readyz']);
      for (const probe of probes) {
        expect(served[name](probe.httpGet.path)).toBe(true);
        const named = c.ports.find((p: K8sObject) => p.name === probe.httpGet.port || p.containerPort === probe.httpGet.port);
        expect(named?.containerPort).toBe(port);
      }
    }
    // The Service reaches the api's port.
    const service = find('Service', 'kiln-api');
    expect(containers(find('Deployment', 'kiln-api'))[0].ports.map((p: K8sObject) => p.name)).toContain(service.spec.ports[0].targetPort);
  });

  it('runs the images docker/ builds: kiln-api (target api) for the api and the migrations, kiln-generator (target generator)', () => {
    const compose = yaml.load(fs.readFileSync(path.join(ROOT, 'docker/compose.yaml'), 'utf8')) as K8sObject;
    const dockerfile = fs.readFileSync(path.join(ROOT, 'docker/Dockerfile'), 'utf8');
    const composeImage = (service: string) => String(compose.services[service].image).split(':')[0];
    const expected: Record<string, string> = {
      'kiln-api': composeImage('api'),
      'kiln-migrate': composeImage('migrate'),
      'kiln-generator': composeImage('generator'),
    };
    expect(expected).toEqual({ 'kiln-api': 'kiln-api', 'kiln-migrate': 'kiln-api', 'kiln-generator': 'kiln-generator' });
    for (const target of ['api', 'generator']) expect(dockerfile).toMatch(new RegExp(`^FROM \\S+ AS ${target}$`, 'm'));
    for (const w of base.filter((o) => o.kind === 'Deployment' || o.kind === 'Job')) {
      expect(containers(w).map((c: K8sObject) => c.image)).toEqual([expected[w.metadata.name]]);
    }
    // The overlay points each at the registry, same repository name.
    for (const w of workloads) {
      for (const c of containers(w)) expect(c.image).toMatch(new RegExp(`/${expected[w.metadata.name]}:[\\w.-]+$`));
    }
    // Commands the image has: the api alone (the Job migrates), with the heap limits it is
    // deployed with everywhere (docker/Dockerfile), the CLI's migrate.
    expect(containers(find('Deployment', 'kiln-api'))[0].command).toEqual([
      'node',
      '--max-old-space-size=512',
      '--max-semi-space-size=32',
      'dist/apps/api/src/main.js',
    ]);
    expect(containers(find('Job', 'kiln-migrate'))[0].command).toEqual(['node', 'dist/apps/api/src/admin-cli.js', 'migrate']);
    for (const source of ['apps/api/src/main.ts', 'apps/api/src/admin-cli.ts']) expect(fs.existsSync(path.join(ROOT, source))).toBe(true);
  });

  it('gives the generators longer than their drain (SHUTDOWN_GRACE_MS) before SIGKILL', () => {
    const generator = find('Deployment', 'kiln-generator');
    const grace = kilnConfigOf(containers(generator)[0]).generator.shutdownGraceMs;
    expect(grace).toBe(30_000);
    expect(podSpec(generator).terminationGracePeriodSeconds * 1000).toBeGreaterThan(grace);
  });

  it("runs every container as the image's non-root user, on a read-only root, with no capabilities", () => {
    const dockerfile = fs.readFileSync(path.join(ROOT, 'docker/Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/^USER node$/m); // uid 1000 in the node images
    for (const w of workloads) {
      const pod = podSpec(w).securityContext;
      expect(pod).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
      expect(podSpec(w).automountServiceAccountToken).toBe(false);
      for (const c of containers(w)) {
        expect(c.securityContext).toEqual({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
        });
      }
    }
  });

  it('lets the generator out only to DNS, PostgreSQL (or PgBouncer), Redis and 443', () => {
    const policy = find('NetworkPolicy', 'kiln-generator');
    const ports = policy.spec.egress.flatMap((rule: K8sObject) => rule.ports.map((p: K8sObject) => p.port));
    expect(new Set(ports)).toEqual(new Set([53, 5432, 6432, 6379, 443]));
    expect(policy.spec.egress.every((rule: K8sObject) => !rule.to)).toBe(true);
    expect(find('NetworkPolicy', 'kiln-default-deny').spec.policyTypes).toEqual(['Ingress', 'Egress']);
  });

  it('has a PodDisruptionBudget and a CPU HPA for the api; KEDA scales the generator Deployment on metrics Kiln exports', async () => {
    expect(find('PodDisruptionBudget', 'kiln-api').spec.selector.matchLabels).toEqual(
      find('Deployment', 'kiln-api').spec.selector.matchLabels,
    );
    const hpa = find('HorizontalPodAutoscaler', 'kiln-api');
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'kiln-api' });
    expect(hpa.spec.metrics[0].resource.name).toBe('cpu');
    expect(keda.spec.scaleTargetRef.name).toBe(find('Deployment', 'kiln-generator').metadata.name);
    const metrics = new KilnMetrics();
    try {
      const declared = new Set((await metrics.registry.getMetricsAsJSON()).map((m) => m.name));
      const used = keda.spec.triggers.flatMap((t: K8sObject) => t.metadata.query.match(/\bkiln_[a-z_]+/g));
      expect(used.length).toBeGreaterThan(0);
      expect(used.filter((n: string) => !declared.has(n))).toEqual([]);
    } finally {
      metrics.onModuleDestroy();
    }
  });
});
