// Validates Kubernetes manifests against the Kubernetes schema with kubernetes-models (the OpenAPI of
// Kubernetes 1.3x; prometheus-operator's CRDs for ServiceMonitor). Reads a multi-document YAML stream
// on standard input (`helm template … | node scripts/validate-manifests.mjs`), prints one line per
// problem and exits 1 when there is any. A kind it knows no schema for is a problem, never a pass.
// Run as a plain node process: kubernetes-models exports its modules under the `import` condition only.
import { Buffer } from 'node:buffer';
import { parseAllDocuments } from 'yaml';

const MODELS = {
  'v1/Service': () => import('kubernetes-models/v1/Service').then((m) => m.Service),
  'v1/Secret': () => import('kubernetes-models/v1/Secret').then((m) => m.Secret),
  'v1/ServiceAccount': () => import('kubernetes-models/v1/ServiceAccount').then((m) => m.ServiceAccount),
  'v1/ConfigMap': () => import('kubernetes-models/v1/ConfigMap').then((m) => m.ConfigMap),
  'apps/v1/Deployment': () => import('kubernetes-models/apps/v1/Deployment').then((m) => m.Deployment),
  'apps/v1/StatefulSet': () => import('kubernetes-models/apps/v1/StatefulSet').then((m) => m.StatefulSet),
  'batch/v1/Job': () => import('kubernetes-models/batch/v1/Job').then((m) => m.Job),
  'autoscaling/v2/HorizontalPodAutoscaler': () =>
    import('kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler').then((m) => m.HorizontalPodAutoscaler),
  'policy/v1/PodDisruptionBudget': () =>
    import('kubernetes-models/policy/v1/PodDisruptionBudget').then((m) => m.PodDisruptionBudget),
  'networking.k8s.io/v1/NetworkPolicy': () =>
    import('kubernetes-models/networking.k8s.io/v1/NetworkPolicy').then((m) => m.NetworkPolicy),
  'networking.k8s.io/v1/Ingress': () =>
    import('kubernetes-models/networking.k8s.io/v1/Ingress').then((m) => m.Ingress),
  'monitoring.coreos.com/v1/ServiceMonitor': () =>
    import('@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor').then(
      (m) => m.ServiceMonitor,
    ),
};

/** Problems of the objects: schema errors, unknown kinds, and how many objects were validated. */
export async function validateManifests(objects) {
  const problems = [];
  for (const object of objects) {
    const id = `${object?.apiVersion}/${object?.kind}`;
    const name = object?.metadata?.name ?? '(no name)';
    const load = MODELS[id];
    if (!load) {
      problems.push(`${id} ${name}: no Kubernetes schema known for this kind`);
      continue;
    }
    const Model = await load();
    try {
      new Model(object).validate();
    } catch (error) {
      problems.push(`${id} ${name}: ${error.message}`);
    }
  }
  return problems;
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

const documents = parseAllDocuments(await readStdin());
const objects = [];
for (const document of documents) {
  if (document.errors.length > 0) {
    process.stdout.write(`unparsable document: ${document.errors[0].message}\n`);
    process.exit(1);
  }
  const value = document.toJS();
  if (value !== null) objects.push(value);
}
if (objects.length === 0) {
  process.stdout.write('no objects on standard input\n');
  process.exit(1);
}
const problems = await validateManifests(objects);
for (const problem of problems) process.stdout.write(`${problem}\n`);
process.stderr.write(`${objects.length} objects validated, ${problems.length} problems\n`);
process.exit(problems.length > 0 ? 1 : 0);
