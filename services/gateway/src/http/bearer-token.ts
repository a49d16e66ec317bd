/** The credential of an `Authorization: Bearer <credential>` header; undefined when absent or malformed. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
  return match?.[1];
}
