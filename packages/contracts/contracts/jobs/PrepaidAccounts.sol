// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {OperatorDirectory} from "./OperatorDirectory.sol";

/// @notice Prepaid balances and the delegates (service signers) a wallet lets spend them.
abstract contract PrepaidAccounts is OperatorDirectory, ReentrancyGuard {
    /// @dev `epoch` changes whenever the wallet sets the allowance or revokes the delegate, so a
    /// refund of a fee paid under an older grant never re-opens an allowance the wallet since changed.
    struct DelegateGrant {
        uint256 allowance;
        uint32 epoch;
        bool authorized;
    }

    mapping(address user => uint256 balance) private _balances;
    mapping(address user => mapping(address delegate => DelegateGrant grant)) private _grants;

    event Deposited(address indexed user, uint256 amount, uint256 newBalance);
    event Withdrew(address indexed user, uint256 amount, uint256 newBalance);
    event DelegateAuthorizationSet(address indexed user, address indexed delegate, bool authorized);
    event DelegateAllowanceSet(address indexed user, address indexed delegate, uint256 allowance);

    error ZeroAmount();
    error InvalidDelegate(address delegate);
    error InsufficientBalance(address user, uint256 required, uint256 available);
    error InsufficientAllowance(address user, address delegate, uint256 required, uint256 available);
    error NotOwnerOrDelegate(address owner, address caller);
    error TransferFailed(address to, uint256 amount);

    function deposit() external payable {
        if (msg.value == 0) revert ZeroAmount();
        _deposit(principalOf(msg.sender), msg.value);
    }

    /// @notice Adds `msg.value` to the balance, authorizes `delegate` and raises its allowance by as much.
    function depositAndAuthorize(address delegate) external payable {
        if (msg.value == 0) revert ZeroAmount();
        address user = principalOf(msg.sender);
        _requireValidDelegate(user, delegate);
        _deposit(user, msg.value);
        DelegateGrant storage grant = _grants[user][delegate];
        if (!grant.authorized) {
            grant.authorized = true;
            emit DelegateAuthorizationSet(user, delegate, true);
        }
        uint256 allowance = grant.allowance + msg.value;
        grant.allowance = allowance;
        emit DelegateAllowanceSet(user, delegate, allowance);
    }

    function withdrawBalance(uint256 amount) external nonReentrant {
        if (amount == 0) revert ZeroAmount();
        address user = principalOf(msg.sender);
        uint256 balance = _balances[user];
        if (amount > balance) revert InsufficientBalance(user, amount, balance);
        uint256 newBalance = balance - amount;
        _balances[user] = newBalance;
        emit Withdrew(user, amount, newBalance);
        _sendValue(user, amount);
    }

    /// @notice Authorizes or revokes `delegate`; revoking also zeroes its allowance.
    function setDelegateAuthorization(address delegate, bool authorized) external {
        address user = principalOf(msg.sender);
        _requireValidDelegate(user, delegate);
        DelegateGrant storage grant = _grants[user][delegate];
        grant.authorized = authorized;
        emit DelegateAuthorizationSet(user, delegate, authorized);
        if (!authorized) {
            grant.allowance = 0;
            ++grant.epoch;
            emit DelegateAllowanceSet(user, delegate, 0);
        }
    }

    /// @notice Sets `delegate`'s allowance to exactly `allowance` and starts a new allowance epoch.
    function setDelegateAllowance(address delegate, uint256 allowance) external {
        address user = principalOf(msg.sender);
        _requireValidDelegate(user, delegate);
        DelegateGrant storage grant = _grants[user][delegate];
        grant.allowance = allowance;
        ++grant.epoch;
        emit DelegateAllowanceSet(user, delegate, allowance);
    }

    function prepaidBalanceOf(address user) external view returns (uint256) {
        return _balances[user];
    }

    function isDelegateAuthorized(address user, address delegate) public view returns (bool) {
        return _grants[user][delegate].authorized;
    }

    function delegateAllowance(address user, address delegate) external view returns (uint256) {
        return _grants[user][delegate].allowance;
    }

    function delegateAllowanceEpoch(address user, address delegate) external view returns (uint32) {
        return _grants[user][delegate].epoch;
    }

    function _deposit(address user, uint256 amount) internal {
        uint256 newBalance = _balances[user] + amount;
        _balances[user] = newBalance;
        emit Deposited(user, amount, newBalance);
    }

    function _debit(address user, uint256 amount) internal {
        uint256 balance = _balances[user];
        if (amount > balance) revert InsufficientBalance(user, amount, balance);
        _balances[user] = balance - amount;
    }

    function _credit(address user, uint256 amount) internal {
        _balances[user] += amount;
    }

    /// @return epoch the allowance epoch the fee was taken under.
    function _spendAllowance(address user, address delegate, uint256 amount) internal returns (uint32 epoch) {
        DelegateGrant storage grant = _grants[user][delegate];
        uint256 allowance = grant.allowance;
        if (amount > allowance) revert InsufficientAllowance(user, delegate, amount, allowance);
        grant.allowance = allowance - amount;
        return grant.epoch;
    }

    /// @dev Gives a refunded fee back to the allowance only while the wallet has not changed it since.
    function _restoreAllowance(address user, address delegate, uint32 epoch, uint256 amount) internal {
        if (delegate == address(0)) return;
        DelegateGrant storage grant = _grants[user][delegate];
        if (grant.epoch != epoch) return;
        uint256 allowance = grant.allowance + amount;
        grant.allowance = allowance;
        emit DelegateAllowanceSet(user, delegate, allowance);
    }

    function _isOwnerOrDelegate(address owner, address principal) internal view returns (bool) {
        return principal == owner || _grants[owner][principal].authorized;
    }

    function _requireOwnerOrDelegate(address owner, address principal) internal view {
        if (!_isOwnerOrDelegate(owner, principal)) revert NotOwnerOrDelegate(owner, principal);
    }

    function _sendValue(address to, uint256 amount) internal {
        (bool ok, ) = to.call{value: amount}("");
        if (!ok) revert TransferFailed(to, amount);
    }

    function _requireValidDelegate(address user, address delegate) private pure {
        if (delegate == address(0) || delegate == user) revert InvalidDelegate(delegate);
    }
}
