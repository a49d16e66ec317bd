// values.yaml documents every value (a `## @param <path> <description>` line, bitnami style) and
// values.schema.json describes every one of them.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { parse } from 'yaml';
import { chartDir } from './support/chart.js';

const text = readFileSync(join(chartDir, 'values.yaml'), 'utf8');
const values = parse(text) as Record<string, unknown>;
const schema = JSON.parse(readFileSync(join(chartDir, 'values.schema.json'), 'utf8')) as SchemaNode & {
  definitions: Record<string, SchemaNode>;
};

interface SchemaNode {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, SchemaNode>;
  additionalProperties?: boolean | SchemaNode;
}

/** Every key path of the values, down to scalars, lists and empty maps. */
function paths(node: unknown, prefix = ''): string[] {
  if (node === null || typeof node !== 'object' || Array.isArray(node) || Object.keys(node).length === 0)
    return [prefix];
  return Object.entries(node as Record<string, unknown>).flatMap(([key, child]) => [
    ...(prefix ? [prefix] : []),
    ...paths(child, prefix ? `${prefix}.${key}` : key),
  ]);
}

const documented = new Map<string, string>();
for (const match of text.matchAll(/^\s*## @param (\S+) (.+)$/gm)) documented.set(match[1]!, match[2]!);

function schemaAt(path: string): SchemaNode | undefined {
  let node: SchemaNode | undefined = schema;
  for (const key of path.split('.')) {
    while (node?.$ref) node = schema.definitions[node.$ref.replace('#/definitions/', '')];
    if (!node) return undefined;
    const next: SchemaNode | undefined = node.properties?.[key];
    if (next) node = next;
    else if (typeof node.additionalProperties === 'object') node = node.additionalProperties;
    else if (node.type === 'object' && node.additionalProperties === undefined && !node.properties)
      return node;
    else return undefined;
  }
  return node;
}

describe('values.yaml', () => {
  const all = [...new Set(paths(values))];

  it('documents every value, or the map it belongs to', () => {
    const undocumented = all.filter((path) => {
      const parts = path.split('.');
      return !parts.some((_part, index) => documented.has(parts.slice(0, index + 1).join('.')));
    });
    // Maps of values (global, gateway.image, …) are documented key by key.
    const leaves = undocumented.filter((path) => !all.some((other) => other.startsWith(`${path}.`)));
    expect(leaves).toEqual([]);
  });

  it('documents only values that exist, each with a description', () => {
    for (const [path, description] of documented) {
      expect({ path, exists: all.includes(path) }).toEqual({ path, exists: true });
      expect(description.length).toBeGreaterThan(5);
    }
  });

  it('has every value described by values.schema.json, which refuses unknown keys', () => {
    expect(schema.additionalProperties).toBe(false);
    const missing = all.filter((path) => schemaAt(path) === undefined);
    expect(missing).toEqual([]);
  });
});
