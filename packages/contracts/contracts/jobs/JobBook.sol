// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {BlobRule} from "../libraries/BlobRule.sol";
import {SessionBook} from "./SessionBook.sol";
import {Job, JobState} from "./Types.sol";

/// @notice Jobs: Submitted → Completed → Released; Submitted → Failed → Submitted (reassigned) |
/// Refunded; Completed → Refunded (proven dispute). The fee sits in escrow from submission until it
/// is released to the worker or refunded to the payer.
abstract contract JobBook is SessionBook {
    mapping(uint256 jobId => Job job) internal _jobs;
    mapping(address worker => uint256 amount) private _earnings;
    uint256 private _protocolFees;

    event JobSubmitted(
        uint256 indexed jobId,
        uint256 sessionId,
        address indexed payer,
        address indexed worker,
        uint256 fee,
        bytes32 promptBlobHash
    );
    event JobCompleted(uint256 indexed jobId, address indexed worker, bytes32 responseHash);
    event JobFailed(uint256 indexed jobId, address indexed worker, bool timedOut);
    event JobReassigned(
        uint256 indexed jobId,
        uint256 indexed newSessionId,
        address indexed worker,
        bytes32 promptBlobHash
    );
    event JobRefunded(uint256 indexed jobId, uint256 amount);
    event JobReleased(uint256 indexed jobId, uint256 workerShare, uint256 protocolShare);
    event EarningsWithdrawn(address indexed worker, uint256 amount);
    event ProtocolFeesWithdrawn(address indexed to, uint256 amount);

    error FeeAboveMax(uint256 fee, uint256 maxFee);
    error JobStateInvalid(uint256 jobId, JobState state);
    error NotJobWorker(uint256 jobId, address caller);
    error ZeroResponseHash(uint256 jobId);
    error JobDeadlinePassed(uint256 jobId, uint64 deadline);
    error JobDeadlineNotReached(uint256 jobId, uint64 deadline);
    error MaxAttemptsReached(uint256 jobId, uint8 attempts);
    error ReassignWindowClosed(uint256 jobId, uint256 closedAt);
    error SessionOwnerMismatch(uint256 sessionId, address expected, address actual);
    error SessionModelMismatch(uint256 sessionId, bytes32 expected, bytes32 actual);
    error RefundNotYetOpen(uint256 jobId, uint256 opensAfter);
    error DisputeWindowOpen(uint256 jobId, uint256 endsAt);
    error NothingToWithdraw(address account);

    function completeJob(uint256 jobId, bytes32 responseHash) external {
        Job storage job = _jobInState(jobId, JobState.Submitted);
        address worker = job.worker;
        if (principalOf(msg.sender) != worker) revert NotJobWorker(jobId, msg.sender);
        if (block.timestamp > job.deadline) revert JobDeadlinePassed(jobId, job.deadline);
        if (responseHash == bytes32(0)) revert ZeroResponseHash(jobId);
        job.state = JobState.Completed;
        job.completedAt = uint64(block.timestamp);
        job.responseHash = responseHash;
        _sessions[job.sessionId].lastActivityAt = uint64(block.timestamp);
        emit JobCompleted(jobId, worker, responseHash);
    }

    /// @notice The worker gives up on the job; the fee stays in escrow for a reassignment or a refund.
    function failJob(uint256 jobId) external {
        Job storage job = _jobInState(jobId, JobState.Submitted);
        if (principalOf(msg.sender) != job.worker) revert NotJobWorker(jobId, msg.sender);
        _fail(jobId, job, false);
    }

    /// @notice Anyone fails a job whose worker let the deadline pass.
    function timeoutJob(uint256 jobId) external {
        Job storage job = _jobInState(jobId, JobState.Submitted);
        if (block.timestamp <= job.deadline) revert JobDeadlineNotReached(jobId, job.deadline);
        _fail(jobId, job, true);
    }

    /// @notice Runs a failed job again in another session of the same owner and model, with a new
    /// blob and the fee already in escrow.
    function reassignJob(uint256 jobId, uint256 newSessionId) external whenNotPaused {
        bytes32 promptBlobHash = BlobRule.singleBlobHash();
        Job storage job = _jobInState(jobId, JobState.Failed);
        SessionRecord storage previous = _sessions[job.sessionId];
        address owner = previous.owner;
        _requireOwnerOrDelegate(owner, principalOf(msg.sender));
        if (job.attempt >= _params.maxAttempts) revert MaxAttemptsReached(jobId, job.attempt);
        uint256 closesAt = uint256(job.failedAt) + _params.refundGrace;
        if (block.timestamp > closesAt) revert ReassignWindowClosed(jobId, closesAt);
        SessionRecord storage next = _sessionTakingJobs(newSessionId);
        if (next.owner != owner) revert SessionOwnerMismatch(newSessionId, owner, next.owner);
        if (next.modelId != previous.modelId) revert SessionModelMismatch(newSessionId, previous.modelId, next.modelId);
        address worker = next.worker;
        job.sessionId = uint64(newSessionId);
        job.worker = worker;
        job.promptBlobHash = promptBlobHash;
        job.deadline = uint64(block.timestamp) + _params.jobTimeout;
        job.failedAt = 0;
        ++job.attempt;
        job.state = JobState.Submitted;
        next.lastActivityAt = uint64(block.timestamp);
        emit JobReassigned(jobId, newSessionId, worker, promptBlobHash);
    }

    /// @notice Returns a failed job's fee to the payer: by the owner or its delegate at once, by
    /// anyone once the refund grace has passed.
    function refundJob(uint256 jobId) external {
        Job storage job = _jobInState(jobId, JobState.Failed);
        uint256 opensAfter = uint256(job.failedAt) + _params.refundGrace;
        if (block.timestamp <= opensAfter) {
            address owner = _sessions[job.sessionId].owner;
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

    function getJob(uint256 jobId) external view returns (Job memory) {
        return _jobs[jobId];
    }

    function earningsOf(address worker) external view returns (uint256) {
        return _earnings[worker];
    }

    function protocolFees() external view returns (uint256) {
        return _protocolFees;
    }

    /// @dev Moves `fee` from `payer`'s balance into escrow and records the job in `sessionId` under the
    /// id the submission named (the session's next, see `nextJobId`). When a delegate sends it, the fee
    /// also comes out of the delegate's allowance.
    function _submit(
        address payer,
        address delegate,
        uint256 sessionId,
        uint256 jobId,
        SessionRecord storage session,
        uint128 fee,
        bytes32 promptBlobHash
    ) internal {
        _debit(payer, fee);
        uint32 epoch = delegate == address(0) ? 0 : _spendAllowance(payer, delegate, fee);
        _takeJobId(sessionId, session, jobId);
        address worker = session.worker;
        Job storage job = _jobs[jobId];
        job.payer = payer;
        job.deadline = uint64(block.timestamp) + _params.jobTimeout;
        job.attempt = 1;
        job.state = JobState.Submitted;
        job.worker = worker;
        if (delegate != address(0)) {
            job.delegate = delegate;
            job.allowanceEpoch = epoch;
        }
        job.sessionId = uint64(sessionId);
        job.fee = fee;
        job.promptBlobHash = promptBlobHash;
        session.lastActivityAt = uint64(block.timestamp);
        emit JobSubmitted(jobId, sessionId, payer, worker, fee, promptBlobHash);
    }

    function _refund(uint256 jobId, Job storage job) internal {
        uint256 fee = job.fee;
        job.state = JobState.Refunded;
        _credit(job.payer, fee);
        _restoreAllowance(job.payer, job.delegate, job.allowanceEpoch, fee);
        emit JobRefunded(jobId, fee);
    }

    function _jobInState(uint256 jobId, JobState expected) internal view returns (Job storage job) {
        job = _jobs[jobId];
        if (job.state != expected) revert JobStateInvalid(jobId, job.state);
    }

    function _fail(uint256 jobId, Job storage job, bool timedOut) private {
        job.state = JobState.Failed;
        job.failedAt = uint64(block.timestamp);
        emit JobFailed(jobId, job.worker, timedOut);
    }

    function _release(uint256 jobId) private {
        Job storage job = _jobInState(jobId, JobState.Completed);
        uint256 endsAt = uint256(job.completedAt) + _params.disputeWindow;
        if (block.timestamp <= endsAt) revert DisputeWindowOpen(jobId, endsAt);
        uint256 fee = job.fee;
        uint256 protocolShare = (fee * _params.protocolShareBps) / BPS;
        uint256 workerShare = fee - protocolShare;
        job.state = JobState.Released;
        _earnings[job.worker] += workerShare;
        _protocolFees += protocolShare;
        emit JobReleased(jobId, workerShare, protocolShare);
    }
}
