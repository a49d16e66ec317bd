// A small reader of the root Dockerfile: its stages and their instructions (continuation lines joined).

export interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

export interface Stage {
  readonly base: string;
  readonly name: string | undefined;
  readonly instructions: Instruction[];
}

export function dockerfileStages(text: string): Stage[] {
  const lines = text
    .replace(/\\\r?\n/g, ' ')
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  const stages: Stage[] = [];
  for (const line of lines) {
    const match = /^([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!match) continue;
    const keyword = match[1]!.toUpperCase();
    const args = match[2]!.replace(/\s+/g, ' ');
    if (keyword === 'FROM') {
      const from = /^(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      stages.push({ base: from?.[1] ?? args, name: from?.[2], instructions: [] });
    } else if (stages.length > 0) stages.at(-1)!.instructions.push({ keyword, args });
  }
  return stages;
}

/** The JSON-array form of ENTRYPOINT or CMD (the exec form), or undefined. */
export function execForm(stage: Stage, keyword: 'ENTRYPOINT' | 'CMD'): string[] | undefined {
  const instruction = stage.instructions.filter((candidate) => candidate.keyword === keyword).at(-1);
  if (!instruction) return undefined;
  return JSON.parse(instruction.args) as string[];
}
