// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {IJobRegistry} from "./interfaces/IJobRegistry.sol";
import {IWorkerRegistry} from "./interfaces/IWorkerRegistry.sol";
import {JobBook} from "./jobs/JobBook.sol";
import {OperatorDirectory} from "./jobs/OperatorDirectory.sol";
import {RegistryConfig} from "./jobs/RegistryConfig.sol";
import {DebitAuthorization, JobState, Parameters} from "./jobs/Types.sol";

/// @title JobRegistry
/// @notice Every chat completion is one job here: paid from a prepaid balance (by the wallet, its
/// delegate, or an x402 `prepaid-debit` authorization), its prompt one payload of a blob of the
/// submitting transaction, answered by the session's worker and settled after a dispute window. `batch`
/// puts many jobs (submissions, commitments) in one transaction, each succeeding or failing on its own.
contract JobRegistry is IJobRegistry, JobBook, EIP712 {
    bytes32 public constant DEBIT_AUTHORIZATION_TYPEHASH =
        keccak256(
            "DebitAuthorization(address payer,address payTo,address facilitator,uint256 maxAmount,uint256 deadline,bytes32 nonce)"
        );
    /// @notice What a worker signs over each final answer it delivers (docs/protocol.md, Worker signature):
    /// EIP-712 typed data in this contract's domain, so the signature is evidence here and nowhere else.
    bytes32 public constant FINAL_ANSWER_TYPEHASH =
        keccak256("FinalAnswer(uint256 jobId,uint256 attempt,uint256 sessionId,bytes32 responseHash)");

    mapping(address payer => mapping(bytes32 nonce => bool used)) private _usedNonces;

    event DebitSettled(address indexed payer, bytes32 indexed nonce, uint256 amount, uint256 indexed jobId);
    event JobDisputed(uint256 indexed jobId, uint256 slashed);
    /// @notice Call `index` of a `batch` reverted with `reason` (a custom error of this contract); the
    /// batch's other calls stand.
    event BatchCallFailed(uint256 indexed index, bytes reason);

    error DebitExpired(uint256 deadline, uint256 timestamp);
    error FacilitatorMismatch(address facilitator, address caller);
    error RecipientMismatch(address payTo, address sessionOwner);
    error FacilitatorNotAuthorized(address payTo, address facilitator);
    error NonceAlreadyUsed(address payer, bytes32 nonce);
    error DebitSignerMismatch(address payer, address signer);
    error DisputeWindowClosed(uint256 jobId, uint256 closedAt);
    error StaleAttempt(uint256 jobId, uint256 attempt, uint256 currentAttempt);
    error NotWorkerSignature(uint256 jobId, address worker, address signer);
    error ResponseMatchesCommitment(uint256 jobId, bytes32 responseHash);
    error NotJobSubmitter(uint256 jobId, address caller);
    error NotWorkerRegistry(address caller);
    error EtherNotAccepted(address sender, uint256 amount);
    error UnknownSelector(bytes4 selector);

    constructor(IWorkerRegistry workerRegistry_, Parameters memory parameters_)
        RegistryConfig(workerRegistry_, parameters_)
        EIP712("JobRegistry", "1")
    {}

    /// @notice Every wei held here belongs to a balance, an escrow, earnings or protocol fees, so
    /// plain transfers are refused.
    receive() external payable {
        revert EtherNotAccepted(msg.sender, msg.value);
    }

    fallback() external payable {
        revert UnknownSelector(msg.sig);
    }

    /// @notice Runs each of `calls` (calldata of this contract's functions) as if sent alone by the
    /// sender, in order; a call that reverts is undone alone and reported (`BatchCallFailed`), so one bad
    /// job never fails or delays the others sharing its transaction (docs/protocol.md, Batches).
    /// @dev A delegatecall to this contract keeps `msg.sender` and the transaction's blobs. Not payable, so
    /// no call can count the same `msg.value` twice.
    function batch(bytes[] calldata calls) external returns (bool[] memory succeeded) {
        succeeded = new bool[](calls.length);
        for (uint256 i = 0; i < calls.length; ++i) {
            (bool ok, bytes memory reason) = address(this).delegatecall(calls[i]);
            succeeded[i] = ok;
            if (!ok) emit BatchCallFailed(i, reason);
        }
    }

    /// @notice Submits job `jobId` (the session's `nextJobId`) paid by `payer`, sent by the payer or its
    /// authorized delegate, in an Active session of the payer or of that delegate; the prompt is payload
    /// `promptIndex` of blob `blobIndex` of this transaction.
    /// @dev A delegate submits into its own sessions, which the payer can neither submit into nor close,
    /// so a payer cannot make a submission the delegate handed to the worker before inclusion revert.
    function submitJobFor(
        address payer,
        uint256 sessionId,
        uint256 jobId,
        uint256 maxFee,
        uint8 blobIndex,
        uint8 promptIndex
    ) external whenNotPaused returns (uint256) {
        SessionRecord storage session = _sessionTakingJobs(sessionId);
        address caller = principalOf(msg.sender);
        address sessionOwner = session.owner;
        if (sessionOwner != payer && sessionOwner != caller) {
            revert SessionOwnerMismatch(sessionId, sessionOwner, payer);
        }
        if (!_maySubmitFor(payer, caller)) revert NotOwnerOrDelegate(payer, caller);
        uint64 fee = _sessionJobFee(session);
        if (fee > maxFee) revert FeeAboveMax(fee, maxFee);
        address delegate = caller == payer ? address(0) : caller;
        _submit(payer, delegate, sessionId, jobId, session, fee, blobIndex, promptIndex);
        return jobId;
    }

    /// @notice x402 `prepaid-debit` settlement: debits the job fee from the authorization's payer
    /// and submits job `jobId` (the session's `nextJobId`) in the facilitator's session in the same
    /// transaction, its prompt as in `submitJobFor`.
    /// @dev Only the session owner or its authorized delegate can send it: `_verifyDebit` requires the
    /// sender's principal to be the facilitator, `payTo` to own the session and the facilitator to be
    /// `payTo` or its delegate. So a payer cannot take the job id of a settlement handed to the worker
    /// before inclusion with a debit of its own.
    function submitJobWithDebit(
        uint256 sessionId,
        uint256 jobId,
        DebitAuthorization calldata auth,
        bytes calldata signature,
        uint8 blobIndex,
        uint8 promptIndex
    ) external whenNotPaused returns (uint256) {
        SessionRecord storage session = _sessionTakingJobs(sessionId);
        _verifyDebit(auth, signature, session.owner);
        uint64 fee = _sessionJobFee(session);
        if (fee > auth.maxAmount) revert FeeAboveMax(fee, auth.maxAmount);
        _usedNonces[auth.payer][auth.nonce] = true;
        _submit(auth.payer, address(0), sessionId, jobId, session, fee, blobIndex, promptIndex);
        emit DebitSettled(auth.payer, auth.nonce, fee, jobId);
        return jobId;
    }

    /// @notice Proves the worker signed (EIP-712 `FinalAnswer`) a final answer for the job's current
    /// attempt other than the one it committed: the payer is refunded and the worker slashed in the
    /// payer's favour. `commitBatch` is every answer hash of the job's commit batch, in order (the
    /// `JobCompleted` events of the transaction that committed it; docs/protocol.md, Commit batches).
    /// @dev The signature binds the attempt and its session: a final the same worker signed for an
    /// earlier attempt (one that failed or timed out uncommitted) proves nothing about this one.
    function disputeMismatch(
        uint256 jobId,
        uint256 attempt,
        bytes calldata ciphertext,
        bytes calldata signature,
        bytes32[] calldata commitBatch
    ) external nonReentrant {
        JobRecord storage job = _jobInState(jobId, JobState.Completed);
        uint256 sessionId = _sessionOf(jobId, job);
        address worker = _sessions[sessionId].worker;
        _requireOwnerOrDelegate(_sessions[sessionId].owner, principalOf(msg.sender));
        {
            uint256 closedAt = uint256(job.stamp) + _params.disputeWindow;
            if (block.timestamp > closedAt) revert DisputeWindowClosed(jobId, closedAt);
        }
        if (attempt != job.attempt) revert StaleAttempt(jobId, attempt, job.attempt);
        bytes32 ciphertextHash = keccak256(ciphertext);
        {
            address signer = ECDSA.recoverCalldata(
                _finalAnswerDigest(jobId, attempt, sessionId, ciphertextHash),
                signature
            );
            if (signer != worker) revert NotWorkerSignature(jobId, worker, signer);
        }
        _requireMismatch(jobId, job, ciphertextHash, commitBatch);
        _refund(jobId, job);
        uint256 slashed = workerRegistry.slash(worker, _params.mismatchSlash, _accountAddress(job.payer));
        emit JobDisputed(jobId, slashed);
    }

    /// @notice Refunds a Completed job whose committed answer never reached its caller (the final was
    /// not delivered, did not decrypt, or the streamed text diverged from it), within the dispute window.
    /// Only the service that submitted the job for someone else may: the job's delegate, or (a job paid
    /// by debit, with no delegate) the session's owner or its delegate when that owner is not the payer.
    /// The payer itself never can, so a caller cannot take an answer and have its fee back. The worker
    /// keeps its stake: nothing proves it at fault.
    function refundUndelivered(uint256 jobId) external nonReentrant {
        JobRecord storage job = _jobInState(jobId, JobState.Completed);
        uint256 closedAt = uint256(job.stamp) + _params.disputeWindow;
        if (block.timestamp > closedAt) revert DisputeWindowClosed(jobId, closedAt);
        address caller = principalOf(msg.sender);
        address owner = _sessions[_sessionOf(jobId, job)].owner;
        address delegate = _accountAddress(job.delegate);
        address payer = _accountAddress(job.payer);
        bool submitter = delegate != address(0) ? caller == delegate : owner != payer && _isOwnerOrDelegate(owner, caller);
        if (!submitter || caller == payer) revert NotJobSubmitter(jobId, caller);
        _refund(jobId, job);
    }

    /// @inheritdoc IJobRegistry
    function creditSlash(address to) external payable {
        if (msg.sender != address(workerRegistry)) revert NotWorkerRegistry(msg.sender);
        _deposit(to, msg.value);
    }

    function isNonceUsed(address payer, bytes32 nonce) external view returns (bool) {
        return _usedNonces[payer][nonce];
    }

    function domainSeparator() external view returns (bytes32) {
        return _domainSeparatorV4();
    }

    function worstCaseLiability() public view override(IJobRegistry, RegistryConfig) returns (uint64) {
        return RegistryConfig.worstCaseLiability();
    }

    function principalOf(address account) public view override(IJobRegistry, OperatorDirectory) returns (address) {
        return OperatorDirectory.principalOf(account);
    }

    /// @dev What the worker signs over a final answer (docs/protocol.md, Worker signature): typed data,
    /// never a personal_sign message, so no text a worker signs elsewhere (a link challenge) can pass as one.
    function _finalAnswerDigest(uint256 jobId, uint256 attempt, uint256 sessionId, bytes32 ciphertextHash)
        private
        view
        returns (bytes32)
    {
        return _hashTypedDataV4(
            keccak256(abi.encode(FINAL_ANSWER_TYPEHASH, jobId, attempt, sessionId, ciphertextHash))
        );
    }

    function _requireMismatch(
        uint256 jobId,
        JobRecord storage job,
        bytes32 ciphertextHash,
        bytes32[] calldata commitBatch
    ) private view {
        bytes32 responseHash = _committedAnswer(jobId, job, commitBatch);
        if (ciphertextHash == responseHash) revert ResponseMatchesCommitment(jobId, responseHash);
    }

    /// @dev Checks in the order the payment settler reports them, so both name the same failure. The
    /// first three also confine the sender to the session owner or its delegate (see submitJobWithDebit).
    function _verifyDebit(DebitAuthorization calldata auth, bytes calldata signature, address sessionOwner)
        private
        view
    {
        if (block.timestamp > auth.deadline) revert DebitExpired(auth.deadline, block.timestamp);
        address caller = principalOf(msg.sender);
        if (caller != auth.facilitator) revert FacilitatorMismatch(auth.facilitator, caller);
        if (auth.payTo != sessionOwner) revert RecipientMismatch(auth.payTo, sessionOwner);
        if (!_isOwnerOrDelegate(auth.payTo, auth.facilitator)) {
            revert FacilitatorNotAuthorized(auth.payTo, auth.facilitator);
        }
        if (_usedNonces[auth.payer][auth.nonce]) revert NonceAlreadyUsed(auth.payer, auth.nonce);
        bytes32 structHash = keccak256(
            abi.encode(
                DEBIT_AUTHORIZATION_TYPEHASH,
                auth.payer,
                auth.payTo,
                auth.facilitator,
                auth.maxAmount,
                auth.deadline,
                auth.nonce
            )
        );
        address signer = ECDSA.recoverCalldata(_hashTypedDataV4(structHash), signature);
        if (signer != auth.payer) revert DebitSignerMismatch(auth.payer, signer);
    }
}
