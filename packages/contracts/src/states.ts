/** Mirrors `SessionState` in contracts/jobs/Types.sol (the numbers are the enum's ABI values). */
export const SessionState = { None: 0, Open: 1, Active: 2, Closed: 3 } as const;
export type SessionState = (typeof SessionState)[keyof typeof SessionState];

/** Mirrors `JobState` in contracts/jobs/Types.sol. */
export const JobState = { None: 0, Submitted: 1, Completed: 2, Failed: 3, Refunded: 4, Released: 5 } as const;
export type JobState = (typeof JobState)[keyof typeof JobState];
