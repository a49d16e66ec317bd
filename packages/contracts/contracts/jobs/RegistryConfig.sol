// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IWorkerRegistry} from "../interfaces/IWorkerRegistry.sol";
import {Parameters} from "./Types.sol";

/// @notice Owner-set configuration of JobRegistry: models and their fees, protocol parameters, pause.
abstract contract RegistryConfig is Ownable, Pausable {
    uint16 internal constant BPS = 10_000;

    IWorkerRegistry public immutable workerRegistry;

    Parameters internal _params;
    /// @dev uint64 (up to 18.4 ether a job) so a job's fee packs beside its payer (JobBook).
    mapping(bytes32 modelId => uint64 fee) private _fees;
    mapping(bytes32 modelId => string name) private _modelNames;
    bytes32[] private _modelIds;
    /// @dev A model's place in `_modelIds` plus one: what a session keeps instead of the 32-byte id, so the
    /// session's worker, state and model share one slot (SessionBook).
    mapping(bytes32 modelId => uint24 number) private _modelNumbers;

    event ModelConfigured(bytes32 indexed modelId, string name, uint256 fee);
    event ParametersSet(Parameters parameters);

    error ZeroAddress();
    error EmptyModelName();
    error ModelDisabled(bytes32 modelId);
    error InvalidParameter(string name, uint256 value);
    error UnbondingDelayTooShort(uint64 required, uint64 actual);

    constructor(IWorkerRegistry workerRegistry_, Parameters memory parameters_) Ownable(msg.sender) {
        if (address(workerRegistry_) == address(0)) revert ZeroAddress();
        workerRegistry = workerRegistry_;
        _setParameters(parameters_);
    }

    /// @notice Sets the fee of the model named exactly `name` (colons included); fee 0 disables it.
    function setModel(string calldata name, uint256 fee) external onlyOwner {
        if (bytes(name).length == 0) revert EmptyModelName();
        bytes32 modelId = keccak256(bytes(name));
        if (bytes(_modelNames[modelId]).length == 0) {
            _modelNames[modelId] = name;
            _modelIds.push(modelId);
            _modelNumbers[modelId] = SafeCast.toUint24(_modelIds.length);
        }
        _fees[modelId] = SafeCast.toUint64(fee);
        emit ModelConfigured(modelId, name, fee);
    }

    function setParameters(Parameters calldata parameters_) external onlyOwner {
        _setParameters(parameters_);
    }

    function pause() external onlyOwner {
        _pause();
    }

    function unpause() external onlyOwner {
        _unpause();
    }

    /// @notice The fee of one job of `modelId`; 0 when the model is unknown or disabled.
    function jobFee(bytes32 modelId) public view returns (uint256) {
        return _fees[modelId];
    }

    function modelName(bytes32 modelId) external view returns (string memory) {
        return _modelNames[modelId];
    }

    /// @notice Every model ever configured, disabled ones included (their fee is 0).
    function modelIds() external view returns (bytes32[] memory) {
        return _modelIds;
    }

    function parameters() external view returns (Parameters memory) {
        return _params;
    }

    /// @notice How long a worker that stops taking sessions may still owe an answer or face a dispute.
    function worstCaseLiability() public view virtual returns (uint64) {
        return _params.jobTimeout + _params.disputeWindow;
    }

    function _requireModelEnabled(bytes32 modelId) internal view returns (uint64 fee) {
        fee = _fees[modelId];
        if (fee == 0) revert ModelDisabled(modelId);
    }

    /// @dev The number of a configured model (see `_modelNumbers`); 0 for one never configured.
    function _modelNumber(bytes32 modelId) internal view returns (uint24) {
        return _modelNumbers[modelId];
    }

    /// @dev The id of model `number` (zero for 0).
    function _modelIdOf(uint24 number) internal view returns (bytes32) {
        return number == 0 ? bytes32(0) : _modelIds[number - 1];
    }

    function _setParameters(Parameters memory p) private {
        if (p.claimWindow == 0) revert InvalidParameter("claimWindow", p.claimWindow);
        if (p.jobTimeout == 0) revert InvalidParameter("jobTimeout", p.jobTimeout);
        if (p.inactivityTimeout == 0) revert InvalidParameter("inactivityTimeout", p.inactivityTimeout);
        if (p.maxAttempts == 0) revert InvalidParameter("maxAttempts", p.maxAttempts);
        if (p.protocolShareBps > BPS) revert InvalidParameter("protocolShareBps", p.protocolShareBps);
        // A worker must not be able to take its stake away while one of its jobs can still be disputed.
        uint64 required = p.jobTimeout + p.disputeWindow;
        uint64 actual = workerRegistry.unbondingDelay();
        if (actual < required) revert UnbondingDelayTooShort(required, actual);
        _params = p;
        emit ParametersSet(p);
    }
}
