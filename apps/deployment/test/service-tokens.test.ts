// The service tokens in the chart: each calling service gets its own private key and nothing else does;
// the called services get the public keys and the internal callers, in settings their configuration
// accepts; values that would share a key or let an internal caller pass for a service are refused.
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { loadConfig, serviceTokenServerSettings } from '@svc/platform';
import { parse } from 'yaml';
import { readFileSync } from 'node:fs';
import {
  containersByTarget,
  envOf,
  fixturesDir,
  fullName,
  helmTemplate,
  render,
  type K8sObject,
} from './support/chart.js';

const allSettings = { valuesFiles: [join(fixturesDir, 'all-settings.yaml')] };
const fixture = parse(readFileSync(join(fixturesDir, 'all-settings.yaml'), 'utf8')) as {
  serviceTokens: {
    publicKeys: { gateway: string[]; jobOrchestrator: string[] };
    internalCallers: Array<{ name: string; publicKeys: string[]; methods: string[] }>;
  };
};
const SERVERS = ['key-service', 'job-orchestrator', 'payment-settler'];

describe('service tokens in the chart', () => {
  const objects = render(allSettings);
  const byTarget = containersByTarget(objects);

  it("mounts each calling service's own private key into it alone", () => {
    expect(envOf(byTarget.get('gateway')!).get('SERVICE_TOKEN_PRIVATE_KEY')?.valueFrom?.secretKeyRef).toEqual(
      {
        name: 'gateway-service-token',
        key: 'SERVICE_TOKEN_PRIVATE_KEY',
      },
    );
    expect(
      envOf(byTarget.get('job-orchestrator')!).get('SERVICE_TOKEN_PRIVATE_KEY')?.valueFrom?.secretKeyRef,
    ).toEqual({ name: 'job-orchestrator-service-token', key: 'SERVICE_TOKEN_PRIVATE_KEY' });
    for (const target of ['key-service', 'payment-settler', 'worker', 'migrate'])
      expect({ target, key: envOf(byTarget.get(target)!).has('SERVICE_TOKEN_PRIVATE_KEY') }).toEqual({
        target,
        key: false,
      });
  });

  it('gives the called services the public keys and internal callers, as their settings read them', () => {
    const { publicKeys, internalCallers } = fixture.serviceTokens;
    for (const target of SERVERS) {
      const env = envOf(byTarget.get(target)!);
      const config = loadConfig(serviceTokenServerSettings, {
        SERVICE_TOKEN_CALLER_KEYS: env.get('SERVICE_TOKEN_CALLER_KEYS')?.value,
        SERVICE_TOKEN_INTERNAL_CALLERS: env.get('SERVICE_TOKEN_INTERNAL_CALLERS')?.value,
      });
      expect(config.SERVICE_TOKEN_CALLER_KEYS).toEqual([
        { caller: 'gateway', publicKey: publicKeys.gateway[0] },
        { caller: 'job-orchestrator', publicKey: publicKeys.jobOrchestrator[0] },
      ]);
      expect(config.SERVICE_TOKEN_INTERNAL_CALLERS).toEqual(internalCallers);
    }
    expect(envOf(byTarget.get('gateway')!).has('SERVICE_TOKEN_CALLER_KEYS')).toBe(false);
  });

  it('keeps inline private keys in a Secret per caller', () => {
    const inline = render({
      values: [
        {
          secrets: {
            gatewayServiceToken: { privateKey: 'gateway-key' },
            jobOrchestratorServiceToken: { privateKey: 'orchestrator-key' },
          },
        },
      ],
    });
    const secrets = inline.filter((object) => object.kind === 'Secret').map((object) => object.metadata.name);
    expect(secrets).toEqual(
      expect.arrayContaining([fullName('gateway-service-token'), fullName('job-orchestrator-service-token')]),
    );
    expect(
      envOf(containersByTarget(inline).get('gateway')!).get('SERVICE_TOKEN_PRIVATE_KEY')?.valueFrom,
    ).toEqual({
      secretKeyRef: { name: fullName('gateway-service-token'), key: 'SERVICE_TOKEN_PRIVATE_KEY' },
    });
  });

  it('lets the internal callers’ pods reach the gRPC ports when networkPolicy.internalCallersFrom names them', () => {
    const peer = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'reports' } } };
    const policies = render({
      ...allSettings,
      values: [{ networkPolicy: { internalCallersFrom: [peer] } }],
    }).filter((object) => object.kind === 'NetworkPolicy');
    const grpcRuleOf = (policy: K8sObject) =>
      (policy.spec as { ingress: Array<{ from?: object[]; ports: Array<{ port: number }> }> }).ingress[0]!;
    for (const target of SERVERS) {
      const policy = policies.find((candidate) => candidate.metadata.name === fullName(target))!;
      expect(grpcRuleOf(policy).from).toContainEqual(peer);
    }
    // Not without it.
    for (const policy of render(allSettings).filter((object) => object.kind === 'NetworkPolicy'))
      expect(JSON.stringify(policy)).not.toContain('reports');
  });

  it.each([
    [
      allSettings,
      { serviceTokens: { publicKeys: { jobOrchestrator: fixture.serviceTokens.publicKeys.gateway } } },
      'the gateway and the job-orchestrator share a key',
    ],
    [
      allSettings,
      {
        serviceTokens: {
          internalCallers: [
            { name: 'gateway', publicKeys: fixture.serviceTokens.publicKeys.gateway, methods: [] },
          ],
        },
      },
      'gateway is a service',
    ],
    [
      allSettings,
      {
        serviceTokens: {
          internalCallers: [
            {
              name: 'reports',
              publicKeys: fixture.serviceTokens.publicKeys.gateway,
              methods: ['RunCompletion'],
            },
          ],
        },
      },
      'RunCompletion',
    ],
    [
      {},
      { global: { strictValidation: true } },
      "secrets.gatewayServiceToken.existingSecret (or privateKey): the gateway's",
    ],
    [{}, { global: { strictValidation: true } }, 'serviceTokens.publicKeys.jobOrchestrator'],
  ])('refuses, over %j, %j', (base, values, message) => {
    const result = helmTemplate({ ...base, values: [values] });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain(message);
  });
});
