const UUID_SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Key and reservation ids are UUIDs; anything else cannot name a row and is answered as unknown. */
export function isKeyId(text: string): boolean {
  return UUID_SHAPE.test(text);
}
