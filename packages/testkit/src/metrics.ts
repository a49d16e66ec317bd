/**
 * The value of one sample in Prometheus text (what `GET /metrics` answers), by name and the labels it
 * must carry (others may be there too); the sum when several series match, undefined when none does.
 */
export function sampleValue(
  text: string,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): number | undefined {
  let total: number | undefined;
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((label) => [
        label[1],
        label[2],
      ]),
    );
    if (Object.entries(labels).every(([label, value]) => present[label] === value))
      total = (total ?? 0) + Number(match[3]);
  }
  return total;
}

/** `GET` a metrics URL and its text; fails unless it answers 200. */
export async function scrape(url: string): Promise<string> {
  const response = await fetch(url);
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}`);
  return response.text();
}
