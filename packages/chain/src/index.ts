export * from './errors.js';
export {
  BLOB_BYTES,
  BLOB_CAPACITY_BYTES,
  BLOB_FRAME_OVERHEAD_BYTES,
  BYTES_PER_FIELD_ELEMENT,
  FIELD_ELEMENTS_PER_BLOB,
  MAX_BLOB_PAYLOAD_BYTES,
  USABLE_BYTES_PER_FIELD_ELEMENT,
  decodeBlob,
  decodeBlobPayloads,
  encodeBlob,
  framedLength,
} from './blob/codec.js';
export {
  KZG_COMMITMENT_BYTES,
  KZG_PROOF_BYTES,
  VERSIONED_HASH_VERSION_KZG,
  blobSidecarOf,
  commitmentOf,
  kzg,
  loadKzgTrustedSetup,
  proofOf,
  verifyBlobProof,
  versionedHash,
  type BlobSidecar,
} from './blob/kzg.js';
export {
  commitsTo,
  kzgThreads,
  provingBlobSidecarOf,
  type KzgOperation,
  type KzgWork,
  type ProvingBlobSidecar,
} from './blob/kzg-thread.js';
export { countKzgWork } from './blob/kzg-metrics.js';
export {
  P256_PRIVATE_KEY_BYTES,
  P256_PUBLIC_KEY_BYTES,
  SessionKeyPair,
  parseP256PublicKey,
} from './envelope/session-key.js';
export {
  MAX_PROMPT_PLAINTEXT_BYTES,
  PROMPT_ENVELOPE_OVERHEAD_BYTES,
  PROMPT_LABEL,
  PROMPT_WIRE_VERSION,
  decryptPrompt,
  encryptPrompt,
  promptAad,
  promptFitsOneBlob,
  type PromptBinding,
  type PromptEncryptionRandomness,
} from './envelope/prompt-cipher.js';
export {
  PROMPT_PLAINTEXT_VERSION,
  PROMPT_ROLES,
  REPLY_KEY_BYTES,
  decodePromptPlaintext,
  encodePromptPlaintext,
  generateReplyKey,
  type Prompt,
  type PromptMessage,
  type PromptRole,
} from './envelope/prompt-plaintext.js';
export { openPrompt } from './envelope/open-prompt.js';
export {
  ANSWER_FRAME_OVERHEAD_BYTES,
  AnswerFrameKind,
  answerFrameAad,
  decryptAnswerFrame,
  encryptAnswerFrame,
  responseHashOf,
  type AnswerFramePosition,
} from './envelope/answer-frame.js';
export {
  FINAL_ANSWER_TYPES,
  finalAnswerDigest,
  finalAnswerDomain,
  isFinalAnswerSignedBy,
  recoverFinalAnswerSigner,
  signFinalAnswer,
  type FinalAnswerBinding,
  type TypedDataSigner,
} from './envelope/answer-signature.js';
export {
  LINK_CHALLENGE_MAX_TTL_MS,
  LINK_CHALLENGE_TYPES,
  LinkChallengeRefusedError,
  checkLinkChallenge,
  linkChallengeDigest,
  linkChallengeDomain,
  recoverLinkChallengeSigner,
  signLinkChallenge,
  type LinkChallengeFields,
} from './link/link-challenge.js';
export {
  ContractRevertError,
  JobState,
  SessionState,
  type ContractError,
  type ContractErrorName,
  type ProtocolParameters,
} from '@svc/contracts';
export {
  ChainClient,
  connectChain,
  type ChainClientOptions,
  type ChainEndpoint,
} from './contracts/chain-client.js';
export type { Job, Session } from './contracts/records.js';
export { commitRootOf, type Commitment, type PromptPlace } from './contracts/job-logs.js';
export { chainTimeAfter, chainTimeNow, SharedChainTime } from './contracts/chain-time.js';
export {
  decodeProtocolLog,
  protocolEventTopics,
  type LogPosition,
  type ProtocolEvent,
  type ProtocolEventName,
  type ProtocolEventOf,
} from './contracts/protocol-events.js';
export {
  ProtocolLogCursor,
  type ProtocolLogBatch,
  type ProtocolLogCursorOptions,
} from './contracts/log-cursor.js';
export { findVerifiedBlob, type BlobLocation, type BlobSource } from './blob-source/blob-source.js';
export { BeaconApiError, BlobNotFoundError, BlobVerificationError } from './blob-source/errors.js';
export { AnvilBlobSource } from './blob-source/anvil-blob-source.js';
export {
  BeaconBlobSource,
  slotAt,
  type BeaconBlobSourceOptions,
  type BeaconBlockResolution,
  type ExecutionBlockReader,
} from './blob-source/beacon-blob-source.js';
export {
  BlobFeeTooHighError,
  NonceTakenError,
  TransactionNotMinedError,
  TransactionRevertedError,
} from './tx/errors.js';
export { RpcProvider } from './contracts/rpc-provider.js';
export { CallBatcher, type BatchEntry, type BatchPolicy } from './tx/call-batcher.js';
export { blobFeeCap, replacementFees, type ExecutionFees, type TransactionFees } from './tx/fees.js';
export {
  OperatorLanes,
  type AccountLease,
  type OperatorLanesOptions,
  type SendingAccount,
  type TransactionLane,
} from './tx/operator-lanes.js';
export {
  InMemorySentTransactionJournal,
  type SentTransactionJournal,
  type SentTransactionRecord,
} from './tx/sent-transaction-journal.js';
export {
  DEFAULT_SENT_TRANSACTION_RETENTION_MS,
  SENT_TRANSACTION_RECORD_VERSION,
  StoreSentTransactionJournal,
  decodeSentTransactionRecord,
  encodeSentTransactionRecord,
  type StoreSentTransactionJournalOptions,
} from './tx/store-sent-transaction-journal.js';
export { signTransaction } from './tx/signed-broadcast.js';
export {
  TransactionSender,
  type SignedTransaction,
  type MinedTransaction,
  type TransactionIntent,
  type TransactionSenderOptions,
} from './tx/transaction-sender.js';
