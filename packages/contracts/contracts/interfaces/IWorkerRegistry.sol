// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @notice What JobRegistry needs from the worker registry.
interface IWorkerRegistry {
    function isActive(address worker) external view returns (bool);

    function serves(address worker, bytes32 modelId) external view returns (bool);

    function unbondingDelay() external view returns (uint64);

    /// @notice Takes min(amount, stake) from `worker` and credits it to `to`'s prepaid balance in
    /// JobRegistry. Callable only by JobRegistry; returns what was taken.
    function slash(address worker, uint256 amount, address to) external returns (uint256 taken);
}
