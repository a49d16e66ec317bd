// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IJobRegistry} from "./interfaces/IJobRegistry.sol";
import {IWorkerRegistry} from "./interfaces/IWorkerRegistry.sol";

/// @title WorkerRegistry
/// @notice Workers stake to serve models. A worker that deregisters takes no new sessions and gets
/// its stake back only after an unbonding delay long enough for its last job to be disputed.
/// @dev Callers act for their principal in JobRegistry (see OperatorDirectory), so a worker may run
/// its transactions from operator accounts too.
contract WorkerRegistry is IWorkerRegistry, Ownable, ReentrancyGuard {
    struct Worker {
        uint128 stake;
        /// @dev Zero while the worker takes sessions; set by `deregister`.
        uint64 unbondingEndsAt;
        bool registered;
    }

    uint256 public minStake;
    uint64 public unbondingDelay;
    IJobRegistry public jobRegistry;

    mapping(address worker => Worker record) private _workers;
    mapping(address worker => bytes32[] modelIds) private _modelsOf;
    mapping(address worker => mapping(bytes32 modelId => bool served)) private _serves;

    event WorkerRegistered(address indexed worker, uint256 stake);
    event WorkerModelsSet(address indexed worker, bytes32[] modelIds);
    event WorkerDeregistered(address indexed worker);
    event WorkerSlashed(address indexed worker, uint256 amount);
    event StakeAdded(address indexed worker, uint256 amount, uint256 newStake);
    event StakeWithdrawn(address indexed worker, uint256 amount);
    event MinStakeSet(uint256 minStake);
    event UnbondingDelaySet(uint64 unbondingDelay);
    event JobRegistrySet(address jobRegistry);

    error ZeroAddress();
    error ZeroAmount();
    error InvalidParameter(string name, uint256 value);
    error JobRegistryAlreadySet(address jobRegistry);
    error UnbondingDelayTooShort(uint64 required, uint64 actual);
    error AlreadyRegistered(address worker);
    error NotRegistered(address worker);
    error StakeBelowMinimum(uint256 required, uint256 provided);
    error AlreadyDeregistered(address worker, uint64 unbondingEndsAt);
    error NotDeregistered(address worker);
    error StakeLocked(address worker, uint64 unbondingEndsAt);
    error NotJobRegistry(address caller);
    error TransferFailed(address to, uint256 amount);
    error EtherNotAccepted(address sender, uint256 amount);
    error UnknownSelector(bytes4 selector);

    constructor(uint256 minStake_, uint64 unbondingDelay_) Ownable(msg.sender) {
        _setMinStake(minStake_);
        _setUnbondingDelay(unbondingDelay_);
    }

    /// @notice Stake enters only through `register` and `addStake`.
    receive() external payable {
        revert EtherNotAccepted(msg.sender, msg.value);
    }

    fallback() external payable {
        revert UnknownSelector(msg.sig);
    }

    /// @notice Links JobRegistry, once: the only caller of `slash` and the source of principals.
    function setJobRegistry(IJobRegistry jobRegistry_) external onlyOwner {
        if (address(jobRegistry) != address(0)) revert JobRegistryAlreadySet(address(jobRegistry));
        if (address(jobRegistry_) == address(0)) revert ZeroAddress();
        jobRegistry = jobRegistry_;
        _requireCoversLiability(unbondingDelay);
        emit JobRegistrySet(address(jobRegistry_));
    }

    /// @notice Raising it leaves workers below the new minimum inactive until they add stake.
    function setMinStake(uint256 minStake_) external onlyOwner {
        _setMinStake(minStake_);
    }

    function setUnbondingDelay(uint64 unbondingDelay_) external onlyOwner {
        _setUnbondingDelay(unbondingDelay_);
    }

    function register(bytes32[] calldata modelIds) external payable {
        address worker = _principalOf(msg.sender);
        Worker storage record = _workers[worker];
        if (record.registered) revert AlreadyRegistered(worker);
        if (msg.value < minStake) revert StakeBelowMinimum(minStake, msg.value);
        record.registered = true;
        record.stake = SafeCast.toUint128(msg.value);
        emit WorkerRegistered(worker, msg.value);
        _setModels(worker, modelIds);
    }

    /// @notice Replaces the set of models the worker serves.
    function setModels(bytes32[] calldata modelIds) external {
        address worker = _principalOf(msg.sender);
        if (!_workers[worker].registered) revert NotRegistered(worker);
        _clearModels(worker);
        _setModels(worker, modelIds);
    }

    function addStake() external payable {
        if (msg.value == 0) revert ZeroAmount();
        address worker = _principalOf(msg.sender);
        Worker storage record = _workers[worker];
        if (!record.registered) revert NotRegistered(worker);
        uint128 newStake = record.stake + SafeCast.toUint128(msg.value);
        record.stake = newStake;
        emit StakeAdded(worker, msg.value, newStake);
    }

    /// @notice Stops new sessions at once and starts the unbonding delay.
    function deregister() external {
        address worker = _principalOf(msg.sender);
        Worker storage record = _workers[worker];
        if (!record.registered) revert NotRegistered(worker);
        if (record.unbondingEndsAt != 0) revert AlreadyDeregistered(worker, record.unbondingEndsAt);
        record.unbondingEndsAt = uint64(block.timestamp) + unbondingDelay;
        emit WorkerDeregistered(worker);
    }

    function withdrawStake() external nonReentrant {
        address worker = _principalOf(msg.sender);
        Worker memory record = _workers[worker];
        if (!record.registered) revert NotRegistered(worker);
        if (record.unbondingEndsAt == 0) revert NotDeregistered(worker);
        if (block.timestamp <= record.unbondingEndsAt) revert StakeLocked(worker, record.unbondingEndsAt);
        delete _workers[worker];
        _clearModels(worker);
        emit StakeWithdrawn(worker, record.stake);
        if (record.stake != 0) _sendValue(worker, record.stake);
    }

    /// @inheritdoc IWorkerRegistry
    /// @dev Never reverts for JobRegistry: an unknown or drained worker yields 0.
    function slash(address worker, uint256 amount, address to) external returns (uint256 taken) {
        if (msg.sender != address(jobRegistry)) revert NotJobRegistry(msg.sender);
        Worker storage record = _workers[worker];
        taken = amount < record.stake ? amount : record.stake;
        if (taken == 0) return 0;
        record.stake -= uint128(taken);
        emit WorkerSlashed(worker, taken);
        jobRegistry.creditSlash{value: taken}(to);
    }

    /// @notice Registered, not deregistered, and staked at least `minStake`.
    function isActive(address worker) public view returns (bool) {
        Worker storage record = _workers[worker];
        return record.registered && record.unbondingEndsAt == 0 && record.stake >= minStake;
    }

    function serves(address worker, bytes32 modelId) external view returns (bool) {
        return _serves[worker][modelId];
    }

    function stakeOf(address worker) external view returns (uint256) {
        return _workers[worker].stake;
    }

    function modelsOf(address worker) external view returns (bytes32[] memory) {
        return _modelsOf[worker];
    }

    function unbondingEndsAt(address worker) external view returns (uint64) {
        return _workers[worker].unbondingEndsAt;
    }

    function _setModels(address worker, bytes32[] calldata modelIds) private {
        bytes32[] storage list = _modelsOf[worker];
        mapping(bytes32 => bool) storage served = _serves[worker];
        for (uint256 i = 0; i < modelIds.length; ++i) {
            bytes32 modelId = modelIds[i];
            if (served[modelId]) continue;
            served[modelId] = true;
            list.push(modelId);
        }
        emit WorkerModelsSet(worker, list);
    }

    function _clearModels(address worker) private {
        bytes32[] storage list = _modelsOf[worker];
        mapping(bytes32 => bool) storage served = _serves[worker];
        for (uint256 i = 0; i < list.length; ++i) delete served[list[i]];
        delete _modelsOf[worker];
    }

    function _principalOf(address account) private view returns (address) {
        IJobRegistry registry = jobRegistry;
        return address(registry) == address(0) ? account : registry.principalOf(account);
    }

    function _setMinStake(uint256 minStake_) private {
        // A stake-less worker could not be slashed for a proven mismatch.
        if (minStake_ == 0) revert InvalidParameter("minStake", minStake_);
        minStake = minStake_;
        emit MinStakeSet(minStake_);
    }

    function _setUnbondingDelay(uint64 unbondingDelay_) private {
        if (unbondingDelay_ == 0) revert InvalidParameter("unbondingDelay", unbondingDelay_);
        _requireCoversLiability(unbondingDelay_);
        unbondingDelay = unbondingDelay_;
        emit UnbondingDelaySet(unbondingDelay_);
    }

    function _requireCoversLiability(uint64 delay) private view {
        if (address(jobRegistry) == address(0)) return;
        uint64 required = jobRegistry.worstCaseLiability();
        if (delay < required) revert UnbondingDelayTooShort(required, delay);
    }

    function _sendValue(address to, uint256 amount) private {
        (bool ok, ) = to.call{value: amount}("");
        if (!ok) revert TransferFailed(to, amount);
    }
}
