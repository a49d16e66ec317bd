// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {SessionBook} from "./SessionBook.sol";
import {Job, JobState} from "./Types.sol";

/// @notice Jobs: Submitted → Completed → Released; Submitted → Failed → Submitted (reassigned) |
/// Refunded; Completed → Refunded (proven dispute). The fee sits in escrow from submission until it
/// is released to the worker or refunded to the payer.
abstract contract JobBook is SessionBook {
    /// @dev A job packed into one slot (docs/architecture.md, Gas): its payer and delegate by account id,
    /// fee, where its prompt or its answer lies, and the state that changes. `stamp` is the deadline while
    /// Submitted, then the time of completion or failure. `index` is the prompt's place in its blob until
    /// the job is completed, then the answer's place in `commitBatch` (0 until then). The prompt blob's
    /// versioned hash is in the job's `JobSubmitted` or `JobReassigned` event, not in storage. The job's
    /// session is the one its id names unless it was reassigned (`_reassignedTo`), its worker the session's.
    struct JobRecord {
        uint32 payer;
        uint32 delegate;
        uint64 fee;
        uint32 commitBatch;
        uint32 allowanceEpoch;
        uint40 stamp;
        uint8 attempt;
        JobState state;
        uint8 index;
    }

    /// @notice Most answers one commit batch holds; a transaction committing more starts another batch.
    uint256 public constant COMMIT_BATCH_SIZE = 256;

    /// @dev Transient slot: this transaction's open commit batch, `id << 16 | answers in it` (0: none yet).
    bytes32 private constant OPEN_COMMIT_BATCH = keccak256("svc.JobBook.openCommitBatch");

    mapping(uint256 jobId => JobRecord job) internal _jobs;
    mapping(uint256 jobId => uint64 sessionId) private _reassignedTo;
    mapping(uint32 commitBatch => bytes32 root) private _commitRoots;
    uint32 private _lastCommitBatch;
    mapping(address worker => uint256 amount) private _earnings;
    uint256 private _protocolFees;

    event JobSubmitted(
        uint256 indexed jobId,
        uint256 sessionId,
        address indexed payer,
        address indexed worker,
        uint256 fee,
        bytes32 promptBlobHash,
        uint8 promptIndex
    );
    event JobCompleted(uint256 indexed jobId, address indexed worker, bytes32 responseHash);
    event JobFailed(uint256 indexed jobId, address indexed worker, bool timedOut);
    event JobReassigned(
        uint256 indexed jobId,
        uint256 indexed newSessionId,
        address indexed worker,
        bytes32 promptBlobHash,
        uint8 promptIndex
    );
    event JobRefunded(uint256 indexed jobId, uint256 amount);
    event JobReleased(uint256 indexed jobId, uint256 workerShare, uint256 protocolShare);
    event EarningsWithdrawn(address indexed worker, uint256 amount);
    event ProtocolFeesWithdrawn(address indexed to, uint256 amount);

    error BlobMissing(uint256 blobIndex);
    error FeeAboveMax(uint256 fee, uint256 maxFee);
    error JobStateInvalid(uint256 jobId, JobState state);
    error NotJobWorker(uint256 jobId, address caller);
    error ZeroResponseHash(uint256 jobId);
    error CommitBatchMismatch(uint256 jobId, uint256 answers);
    error JobDeadlinePassed(uint256 jobId, uint64 deadline);
    error JobDeadlineNotReached(uint256 jobId, uint64 deadline);
    error MaxAttemptsReached(uint256 jobId, uint8 attempts);
    error ReassignWindowClosed(uint256 jobId, uint256 closedAt);
    error SessionOwnerMismatch(uint256 sessionId, address expected, address actual);
    error SessionModelMismatch(uint256 sessionId, bytes32 expected, bytes32 actual);
    error RefundNotYetOpen(uint256 jobId, uint256 opensAfter);
    error DisputeWindowOpen(uint256 jobId, uint256 endsAt);
    error NothingToWithdraw(address account);

    /// @notice Commits `responseHash` as the job's answer. It joins this transaction's commit batch
    /// (docs/protocol.md, Commit batches): one root in storage for up to `COMMIT_BATCH_SIZE` answers,
    /// each answer's hash in its `JobCompleted` event.
    function completeJob(uint256 jobId, bytes32 responseHash) external {
        JobRecord storage job = _jobInState(jobId, JobState.Submitted);
        address worker = _workerOf(jobId, job);
        if (principalOf(msg.sender) != worker) revert NotJobWorker(jobId, msg.sender);
        if (block.timestamp > job.stamp) revert JobDeadlinePassed(jobId, job.stamp);
        if (responseHash == bytes32(0)) revert ZeroResponseHash(jobId);
        (job.commitBatch, job.index) = _addToCommitBatch(responseHash);
        job.state = JobState.Completed;
        job.stamp = uint40(block.timestamp);
        emit JobCompleted(jobId, worker, responseHash);
    }

    /// @notice The worker gives up on the job; the fee stays in escrow for a reassignment or a refund.
    function failJob(uint256 jobId) external {
        JobRecord storage job = _jobInState(jobId, JobState.Submitted);
        address worker = _workerOf(jobId, job);
        if (principalOf(msg.sender) != worker) revert NotJobWorker(jobId, msg.sender);
        _fail(jobId, job, worker, false);
    }

    /// @notice Anyone fails a job whose worker let the deadline pass.
    function timeoutJob(uint256 jobId) external {
        JobRecord storage job = _jobInState(jobId, JobState.Submitted);
        if (block.timestamp <= job.stamp) revert JobDeadlineNotReached(jobId, job.stamp);
        _fail(jobId, job, _workerOf(jobId, job), true);
    }

    /// @notice Runs a failed job again in another session of the same owner and model, with its prompt
    /// at `promptIndex` in blob `blobIndex` of this transaction and the fee already in escrow.
    function reassignJob(uint256 jobId, uint256 newSessionId, uint8 blobIndex, uint8 promptIndex)
        external
        whenNotPaused
    {
        bytes32 promptBlobHash = _promptBlobHash(blobIndex);
        JobRecord storage job = _jobInState(jobId, JobState.Failed);
        SessionRecord storage previous = _sessions[_sessionOf(jobId, job)];
        address owner = previous.owner;
        _requireOwnerOrDelegate(owner, principalOf(msg.sender));
        if (job.attempt >= _params.maxAttempts) revert MaxAttemptsReached(jobId, job.attempt);
        uint256 closesAt = uint256(job.stamp) + _params.refundGrace;
        if (block.timestamp > closesAt) revert ReassignWindowClosed(jobId, closesAt);
        SessionRecord storage next = _sessionTakingJobs(newSessionId);
        if (next.owner != owner) revert SessionOwnerMismatch(newSessionId, owner, next.owner);
        if (next.model != previous.model) {
            revert SessionModelMismatch(newSessionId, _modelIdOf(previous.model), _modelIdOf(next.model));
        }
        _reassignedTo[jobId] = uint64(newSessionId);
        job.index = promptIndex;
        job.stamp = uint40(block.timestamp) + uint40(_params.jobTimeout);
        ++job.attempt;
        job.state = JobState.Submitted;
        next.lastActivityAt = uint64(block.timestamp);
        emit JobReassigned(jobId, newSessionId, next.worker, promptBlobHash, promptIndex);
    }

    /// @notice Returns a failed job's fee to the payer: by the owner or its delegate at once, by
    /// anyone once the refund grace has passed.
    function refundJob(uint256 jobId) external {
        JobRecord storage job = _jobInState(jobId, JobState.Failed);
        uint256 opensAfter = uint256(job.stamp) + _params.refundGrace;
        if (block.timestamp <= opensAfter) {
            address owner = _sessions[_sessionOf(jobId, job)].owner;
            if (!_isOwnerOrDelegate(owner, principalOf(msg.sender))) revert RefundNotYetOpen(jobId, opensAfter);
        }
        _refund(jobId, job);
    }

    /// @notice Pays out a completed job once its dispute window has passed.
    function releaseJob(uint256 jobId) external {
        _release(jobId);
    }

    /// @notice Releases every listed job, or none if any of them cannot be released yet.
    function releaseJobs(uint256[] calldata jobIds) external {
        for (uint256 i = 0; i < jobIds.length; ++i) _release(jobIds[i]);
    }

    function withdrawEarnings() external nonReentrant {
        address worker = principalOf(msg.sender);
        uint256 amount = _earnings[worker];
        if (amount == 0) revert NothingToWithdraw(worker);
        _earnings[worker] = 0;
        emit EarningsWithdrawn(worker, amount);
        _sendValue(worker, amount);
    }

    function withdrawProtocolFees(address to) external onlyOwner nonReentrant {
        if (to == address(0)) revert ZeroAddress();
        uint256 amount = _protocolFees;
        if (amount == 0) revert NothingToWithdraw(to);
        _protocolFees = 0;
        emit ProtocolFeesWithdrawn(to, amount);
        _sendValue(to, amount);
    }

    /// @notice The root of commit batch `commitBatch` (zero if there is none): see `completeJob`.
    function commitRoot(uint32 commitBatch) external view returns (bytes32) {
        return _commitRoots[commitBatch];
    }

    function getJob(uint256 jobId) external view returns (Job memory) {
        JobRecord storage job = _jobs[jobId];
        JobState state = job.state;
        if (state == JobState.None) return _emptyJob();
        uint64 stamp = job.stamp;
        // A completed job names its commit batch from then on, and never runs again.
        bool answered = job.commitBatch != 0;
        uint256 sessionId = _sessionOf(jobId, job);
        return
            Job({
                payer: _accountAddress(job.payer),
                deadline: state == JobState.Submitted ? stamp : 0,
                attempt: job.attempt,
                state: state,
                worker: _sessions[sessionId].worker,
                completedAt: answered ? stamp : 0,
                delegate: _accountAddress(job.delegate),
                failedAt: answered || state == JobState.Submitted ? 0 : stamp,
                allowanceEpoch: job.allowanceEpoch,
                sessionId: uint64(sessionId),
                fee: job.fee,
                promptIndex: answered ? 0 : job.index,
                commitBatch: job.commitBatch,
                commitIndex: answered ? job.index : 0
            });
    }

    function earningsOf(address worker) external view returns (uint256) {
        return _earnings[worker];
    }

    function protocolFees() external view returns (uint256) {
        return _protocolFees;
    }

    /// @dev Moves `fee` from `payer`'s balance into escrow and records the job in `sessionId` under the
    /// id the submission named (the session's next, see `nextJobId`), its prompt at `promptIndex` in blob
    /// `blobIndex` of this transaction. When a delegate sends it, the fee also comes out of the
    /// delegate's allowance.
    function _submit(
        address payer,
        address delegate,
        uint256 sessionId,
        uint256 jobId,
        SessionRecord storage session,
        uint64 fee,
        uint8 blobIndex,
        uint8 promptIndex
    ) internal {
        bytes32 promptBlobHash = _promptBlobHash(blobIndex);
        uint32 payerId = _debit(payer, fee);
        (uint32 delegateId, uint32 epoch) = delegate == address(0)
            ? (0, 0)
            : (_accountIdOf(delegate), _spendAllowance(payer, delegate, fee));
        _takeJobId(sessionId, session, jobId);
        _storeNewJob(
            _jobs[jobId],
            JobRecord({
                payer: payerId,
                delegate: delegateId,
                fee: fee,
                commitBatch: 0,
                allowanceEpoch: epoch,
                stamp: uint40(block.timestamp) + uint40(_params.jobTimeout),
                attempt: 1,
                state: JobState.Submitted,
                index: promptIndex
            })
        );
        emit JobSubmitted(jobId, sessionId, payer, session.worker, fee, promptBlobHash, promptIndex);
    }

    function _refund(uint256 jobId, JobRecord storage job) internal {
        uint256 fee = job.fee;
        address payer = _accountAddress(job.payer);
        job.state = JobState.Refunded;
        _credit(payer, fee);
        _restoreAllowance(payer, _accountAddress(job.delegate), job.allowanceEpoch, fee);
        emit JobRefunded(jobId, fee);
    }

    function _jobInState(uint256 jobId, JobState expected) internal view returns (JobRecord storage job) {
        job = _jobs[jobId];
        if (job.state != expected) revert JobStateInvalid(jobId, job.state);
    }

    /// @dev The session the job runs in now: the one its id names, or (from its second attempt on) the
    /// one it was reassigned to.
    function _sessionOf(uint256 jobId, JobRecord storage job) internal view returns (uint256) {
        return job.attempt > 1 ? _reassignedTo[jobId] : jobId >> 32;
    }

    function _workerOf(uint256 jobId, JobRecord storage job) internal view returns (address) {
        return _sessions[_sessionOf(jobId, job)].worker;
    }

    /// @dev The versioned hash of blob `blobIndex` of this transaction. Every call frame of a transaction
    /// sees the same blobs, so a call of `batch` names them as a transaction sent alone would.
    function _promptBlobHash(uint8 blobIndex) private view returns (bytes32 versionedHash) {
        versionedHash = blobhash(blobIndex);
        if (versionedHash == bytes32(0)) revert BlobMissing(blobIndex);
    }

    /// @dev Writes a new job's slot in one SSTORE. Assigned field by field (what the IR pipeline makes of
    /// a struct assignment), the slot was read and written again for each of its nine fields. The word is
    /// Solidity's packing of `JobRecord`: the first field in the lowest bits; `getJob` reads it back.
    function _storeNewJob(JobRecord storage slot, JobRecord memory job) private {
        uint256 word = uint256(job.payer) | (uint256(job.delegate) << 32) | (uint256(job.fee) << 64)
            | (uint256(job.commitBatch) << 128) | (uint256(job.allowanceEpoch) << 160) | (uint256(job.stamp) << 192)
            | (uint256(job.attempt) << 232) | (uint256(uint8(job.state)) << 240) | (uint256(job.index) << 248);
        assembly ("memory-safe") {
            sstore(slot.slot, word)
        }
    }

    /// @dev Appends an answer to this transaction's open commit batch (opening one when there is none or
    /// it is full): its root becomes `keccak256(root ‖ responseHash)`, from zero. Only the first answer of
    /// a batch writes a new slot; the rest rewrite it within the transaction. A call of `batch` that
    /// reverts undoes its answer, transient slot included, so the batch holds exactly the answers of the
    /// `JobCompleted` events the transaction keeps, in their order.
    /// @return id the commit batch, @return index the answer's place in it.
    function _addToCommitBatch(bytes32 responseHash) private returns (uint32 id, uint8 index) {
        bytes32 slot = OPEN_COMMIT_BATCH;
        uint256 open;
        assembly ("memory-safe") {
            open := tload(slot)
        }
        uint256 answers = open & 0xffff;
        id = uint32(open >> 16);
        if (id == 0 || answers == COMMIT_BATCH_SIZE) {
            id = ++_lastCommitBatch;
            answers = 0;
        }
        index = uint8(answers);
        _commitRoots[id] = keccak256(abi.encodePacked(_commitRoots[id], responseHash));
        open = (uint256(id) << 16) | (answers + 1);
        assembly ("memory-safe") {
            tstore(slot, open)
        }
    }

    /// @dev The answer job `jobId` committed, given every answer of its commit batch in order (from its
    /// transaction's `JobCompleted` events): reverts unless they make the batch's root.
    function _committedAnswer(uint256 jobId, JobRecord storage job, bytes32[] calldata commitBatch)
        internal
        view
        returns (bytes32)
    {
        bytes32 root;
        for (uint256 i = 0; i < commitBatch.length; ++i) {
            root = keccak256(abi.encodePacked(root, commitBatch[i]));
        }
        if (root != _commitRoots[job.commitBatch] || job.index >= commitBatch.length) {
            revert CommitBatchMismatch(jobId, commitBatch.length);
        }
        return commitBatch[job.index];
    }

    function _fail(uint256 jobId, JobRecord storage job, address worker, bool timedOut) private {
        job.state = JobState.Failed;
        job.stamp = uint40(block.timestamp);
        emit JobFailed(jobId, worker, timedOut);
    }

    function _release(uint256 jobId) private {
        JobRecord storage job = _jobInState(jobId, JobState.Completed);
        uint256 endsAt = uint256(job.stamp) + _params.disputeWindow;
        if (block.timestamp <= endsAt) revert DisputeWindowOpen(jobId, endsAt);
        uint256 fee = job.fee;
        uint256 protocolShare = (fee * _params.protocolShareBps) / BPS;
        uint256 workerShare = fee - protocolShare;
        job.state = JobState.Released;
        _earnings[_workerOf(jobId, job)] += workerShare;
        _protocolFees += protocolShare;
        emit JobReleased(jobId, workerShare, protocolShare);
    }

    function _emptyJob() private pure returns (Job memory job) {}
}
