// The ports this service uses from `@svc/platform`, in one place. The event bus is not yet exported from
// the package's index, so it is still taken from the sources; once it is, the second line becomes
// `from '@svc/platform'` too (and `npm run build` works again: tsc refuses sources outside rootDir).
export {
  MemoryStore,
  RedisStore,
  type ExpiringValues,
  type RevocationMarkers,
  type Store,
} from '@svc/platform';
export * from '../../../packages/platform/src/events/index.js';
