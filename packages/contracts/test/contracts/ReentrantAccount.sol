// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @notice Test fixture: a contract account that, when paid, calls back into the payer to try to
/// withdraw twice and records how that nested call ended, or refuses payments outright.
contract ReentrantAccount {
    address private immutable _controller;
    address public reentryTarget;
    bytes public reentryCall;
    bool public reentered;
    bytes public reentryResult;
    uint256 public received;
    bool public refusesPayments;

    error NotController(address caller);
    error CallFailed(bytes reason);
    error PaymentRefused();

    constructor() {
        _controller = msg.sender;
    }

    /// @notice Sends a call as this account (to register, deposit, withdraw...).
    function execute(address target, uint256 value, bytes calldata data) external payable returns (bytes memory) {
        if (msg.sender != _controller) revert NotController(msg.sender);
        (bool ok, bytes memory result) = target.call{value: value}(data);
        if (!ok) revert CallFailed(result);
        return result;
    }

    function armReentry(address target, bytes calldata data) external {
        if (msg.sender != _controller) revert NotController(msg.sender);
        reentryTarget = target;
        reentryCall = data;
    }

    function setRefusesPayments(bool refuses) external {
        if (msg.sender != _controller) revert NotController(msg.sender);
        refusesPayments = refuses;
    }

    receive() external payable {
        if (refusesPayments) revert PaymentRefused();
        received += msg.value;
        address target = reentryTarget;
        if (target == address(0)) return;
        reentryTarget = address(0);
        (bool ok, bytes memory result) = target.call(reentryCall);
        reentered = ok;
        reentryResult = result;
    }
}
