// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @notice What WorkerRegistry needs from JobRegistry.
interface IJobRegistry {
    function principalOf(address account) external view returns (address);

    /// @notice The longest time a worker may still owe an answer or face a dispute after it stops
    /// taking new sessions (job timeout + dispute window).
    function worstCaseLiability() external view returns (uint64);

    /// @notice Receives slashed stake from WorkerRegistry into `to`'s prepaid balance.
    function creditSlash(address to) external payable;
}
