// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

enum SessionState {
    None,
    Open,
    Active,
    Closed
}

enum JobState {
    None,
    Submitted,
    Completed,
    Failed,
    Refunded,
    Released
}

/// @notice Owner-set protocol parameters; durations in seconds.
struct Parameters {
    uint64 claimWindow;
    uint64 jobTimeout;
    uint64 inactivityTimeout;
    uint64 refundGrace;
    uint64 disputeWindow;
    uint8 maxAttempts;
    /// @dev Share of every released fee kept by the protocol, in basis points.
    uint16 protocolShareBps;
    /// @dev Stake taken from a worker proven to have signed an answer other than the one it committed.
    uint128 mismatchSlash;
}

/// @notice A session as returned by `getSession`.
struct Session {
    address owner;
    address worker;
    bytes32 modelId;
    uint64 claimDeadline;
    uint64 lastActivityAt;
    SessionState state;
    /// @dev 65-byte uncompressed P-256 key; empty until claimed.
    bytes publicKey;
}

/// @notice A job as returned by `getJob` (JobBook keeps it packed in one slot).
/// @dev `deadline` is set while Submitted; `completedAt` once Completed (kept when Released or refunded
/// after a dispute); `failedAt` while Failed (kept when refunded). `promptIndex` is the prompt's place in
/// its blob until the job is completed, `commitBatch` and `commitIndex` the answer's place from then on.
/// The prompt blob's versioned hash is in the job's `JobSubmitted` or `JobReassigned` event, the answer's
/// hash in its `JobCompleted` (docs/protocol.md, Commit batches).
struct Job {
    address payer;
    uint64 deadline;
    uint8 attempt;
    JobState state;
    address worker;
    uint64 completedAt;
    /// @dev The delegate whose allowance paid the fee (zero when the payer sent it itself).
    address delegate;
    uint64 failedAt;
    uint32 allowanceEpoch;
    uint64 sessionId;
    uint128 fee;
    /// @dev The prompt's place among the payloads of its blob (docs/protocol.md, Blob format).
    uint8 promptIndex;
    uint32 commitBatch;
    uint8 commitIndex;
}

/// @notice The x402 `prepaid-debit` authorization a payer signs (EIP-712).
struct DebitAuthorization {
    address payer;
    address payTo;
    address facilitator;
    uint256 maxAmount;
    uint256 deadline;
    bytes32 nonce;
}
