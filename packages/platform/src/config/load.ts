import { InvalidValue, type ConfigField } from './fields.js';

export type ConfigShape = Record<string, ConfigField<unknown>>;
export type ConfigOf<S extends ConfigShape> = {
  readonly [K in keyof S]: S[K] extends ConfigField<infer T> ? T : never;
};

/** Every problem of a configuration at once, so an operator fixes them in one go. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/** Reads and validates a configuration from environment variables, once, at start-up. */
export function loadConfig<S extends ConfigShape>(
  shape: S,
  source: NodeJS.ProcessEnv = process.env,
): ConfigOf<S> {
  const values: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [name, definition] of Object.entries(shape)) {
    try {
      values[name] = definition.parse(source[name]);
    } catch (error) {
      if (!(error instanceof InvalidValue)) throw error;
      const shown = definition.secret || source[name] === undefined ? '' : ` (got "${source[name]}")`;
      problems.push(`${name} ${error.message}${shown}`);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(values) as ConfigOf<S>;
}

/** The configuration reference of a service as a Markdown table, for docs/configuration.md. */
export function configReference(shape: ConfigShape): string {
  const rows = Object.entries(shape).map(([name, definition]) => {
    const fallback =
      definition.defaultText === ''
        ? 'empty'
        : definition.defaultText !== undefined
          ? `\`${definition.defaultText}\``
          : definition.required
            ? 'required'
            : 'unset';
    return `| \`${name}\` | ${fallback} | ${definition.doc} |`;
  });
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}
