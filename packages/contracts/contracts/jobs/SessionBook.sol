// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {PrepaidAccounts} from "./PrepaidAccounts.sol";
import {RegistryConfig} from "./RegistryConfig.sol";
import {Session, SessionState} from "./Types.sol";

/// @notice Sessions: None → Open → Active → Closed. The service names the worker; the worker accepts
/// by claiming with a fresh P-256 key that prompts of this session are encrypted to.
abstract contract SessionBook is PrepaidAccounts, RegistryConfig {
    uint256 private constant PUBLIC_KEY_LENGTH = 65;
    bytes1 private constant UNCOMPRESSED_POINT = 0x04;

    /// @dev The key is kept as its two coordinates (the 0x04 prefix is implied): two slots, not four.
    /// What a submission writes (`jobCount`, `lastActivityAt`) shares the first slot, what it only reads
    /// (`worker`, `state`, the model by its number) the second.
    struct SessionRecord {
        address owner;
        /// @dev Jobs submitted in the session so far: the sequence its job ids are made of.
        uint32 jobCount;
        uint64 lastActivityAt;
        address worker;
        uint64 claimDeadline;
        SessionState state;
        uint24 model;
        bytes32 publicKeyX;
        bytes32 publicKeyY;
    }

    uint64 private _lastSessionId;
    mapping(uint256 sessionId => SessionRecord session) internal _sessions;

    event SessionOpened(
        uint256 indexed sessionId,
        address indexed owner,
        bytes32 modelId,
        address indexed worker,
        uint64 claimDeadline
    );
    event SessionClaimed(uint256 indexed sessionId, address indexed worker, bytes sessionPublicKey);
    event SessionClosed(uint256 indexed sessionId);

    error WorkerNotActive(address worker);
    error WorkerDoesNotServeModel(address worker, bytes32 modelId);
    error SessionStateInvalid(uint256 sessionId, SessionState state);
    error NotSessionWorker(uint256 sessionId, address caller);
    error ClaimWindowClosed(uint256 sessionId, uint64 claimDeadline);
    error InvalidSessionPublicKey(uint256 length, bytes1 prefix);
    error SessionNotClosable(uint256 sessionId, address caller);
    error UnexpectedJobId(uint256 sessionId, uint256 expected, uint256 given);

    /// @notice Opens a session of `owner` for `modelId`, naming `worker`, who must claim it within
    /// the claim window.
    function openSession(address owner, bytes32 modelId, address worker)
        external
        whenNotPaused
        returns (uint256 sessionId)
    {
        if (owner == address(0)) revert ZeroAddress();
        _requireOwnerOrDelegate(owner, principalOf(msg.sender));
        _requireModelEnabled(modelId);
        _requireActiveWorker(worker);
        if (!workerRegistry.serves(worker, modelId)) revert WorkerDoesNotServeModel(worker, modelId);
        uint64 claimDeadline = uint64(block.timestamp) + _params.claimWindow;
        sessionId = ++_lastSessionId;
        SessionRecord storage session = _sessions[sessionId];
        session.owner = owner;
        session.claimDeadline = claimDeadline;
        session.worker = worker;
        session.state = SessionState.Open;
        session.model = _modelNumber(modelId);
        emit SessionOpened(sessionId, owner, modelId, worker, claimDeadline);
    }

    function claimSession(uint256 sessionId, bytes calldata sessionPublicKey) external whenNotPaused {
        SessionRecord storage session = _sessions[sessionId];
        if (session.state != SessionState.Open) revert SessionStateInvalid(sessionId, session.state);
        address worker = session.worker;
        if (principalOf(msg.sender) != worker) revert NotSessionWorker(sessionId, msg.sender);
        if (block.timestamp > session.claimDeadline) revert ClaimWindowClosed(sessionId, session.claimDeadline);
        _requireActiveWorker(worker);
        if (sessionPublicKey.length != PUBLIC_KEY_LENGTH || sessionPublicKey[0] != UNCOMPRESSED_POINT) {
            revert InvalidSessionPublicKey(
                sessionPublicKey.length,
                sessionPublicKey.length == 0 ? bytes1(0) : sessionPublicKey[0]
            );
        }
        session.publicKeyX = bytes32(sessionPublicKey[1:33]);
        session.publicKeyY = bytes32(sessionPublicKey[33:65]);
        session.state = SessionState.Active;
        session.lastActivityAt = uint64(block.timestamp);
        emit SessionClaimed(sessionId, worker, sessionPublicKey);
    }

    /// @notice The owner, its delegate or the worker close at any time; anyone closes a session left
    /// unclaimed past its deadline or idle past the inactivity timeout. Submitted jobs stay settleable.
    function closeSession(uint256 sessionId) external {
        SessionRecord storage session = _sessions[sessionId];
        SessionState state = session.state;
        if (state != SessionState.Open && state != SessionState.Active) {
            revert SessionStateInvalid(sessionId, state);
        }
        address caller = principalOf(msg.sender);
        bool party = caller == session.worker || _isOwnerOrDelegate(session.owner, caller);
        if (!party && !_isAbandoned(session)) revert SessionNotClosable(sessionId, msg.sender);
        session.state = SessionState.Closed;
        emit SessionClosed(sessionId);
    }

    /// @notice The id the next job submitted in `sessionId` gets: `sessionId << 32 | sequence`, the
    /// sequence counting that session's jobs from 1. Known before the submission is mined, so the service
    /// names the job from the first byte and the worker signs its answer before inclusion
    /// (docs/protocol.md, Job ids); a submission names it and reverts if another took it first.
    function nextJobId(uint256 sessionId) public view returns (uint256) {
        return _jobIdOf(sessionId, _sessions[sessionId].jobCount + 1);
    }

    function getSession(uint256 sessionId) external view returns (Session memory) {
        // lastActivityAt is first set by the claim, so it tells whether a key was published.
        SessionRecord storage record = _sessions[sessionId];
        bytes memory publicKey = record.lastActivityAt != 0
            ? abi.encodePacked(UNCOMPRESSED_POINT, record.publicKeyX, record.publicKeyY)
            : bytes("");
        return
            Session({
                owner: record.owner,
                worker: record.worker,
                modelId: _modelIdOf(record.model),
                claimDeadline: record.claimDeadline,
                lastActivityAt: record.lastActivityAt,
                state: record.state,
                publicKey: publicKey
            });
    }

    /// @dev The fee of a job in `session`: its model's, which must be enabled.
    function _sessionJobFee(SessionRecord storage session) internal view returns (uint64) {
        return _requireModelEnabled(_modelIdOf(session.model));
    }

    /// @dev An Active session whose worker is still active: the precondition of putting a job in it.
    function _sessionTakingJobs(uint256 sessionId) internal view returns (SessionRecord storage session) {
        session = _sessions[sessionId];
        if (session.state != SessionState.Active) revert SessionStateInvalid(sessionId, session.state);
        _requireActiveWorker(session.worker);
    }

    /// @dev Takes the session's next sequence number for a submission that names `jobId`; the submission
    /// is the session's latest activity (one slot written).
    function _takeJobId(uint256 sessionId, SessionRecord storage session, uint256 jobId) internal {
        uint32 sequence = session.jobCount + 1;
        uint256 expected = _jobIdOf(sessionId, sequence);
        if (jobId != expected) revert UnexpectedJobId(sessionId, expected, jobId);
        session.jobCount = sequence;
        session.lastActivityAt = uint64(block.timestamp);
    }

    function _jobIdOf(uint256 sessionId, uint256 sequence) private pure returns (uint256) {
        return (sessionId << 32) | sequence;
    }

    function _requireActiveWorker(address worker) internal view {
        if (!workerRegistry.isActive(worker)) revert WorkerNotActive(worker);
    }

    function _isAbandoned(SessionRecord storage session) private view returns (bool) {
        if (session.state == SessionState.Open) return block.timestamp > session.claimDeadline;
        return block.timestamp > uint256(session.lastActivityAt) + _params.inactivityTimeout;
    }
}
