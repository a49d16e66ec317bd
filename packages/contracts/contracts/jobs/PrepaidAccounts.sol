// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {OperatorDirectory} from "./OperatorDirectory.sol";

/// @notice Prepaid balances and the delegates (service signers) a wallet lets spend them.
abstract contract PrepaidAccounts is OperatorDirectory, ReentrancyGuard {
    /// @dev `epoch` changes whenever the wallet sets the allowance or revokes the delegate, so a
    /// refund of a fee paid under an older grant never re-opens an allowance the wallet since changed.
    /// `graceAllowance` is what a cut (a lower allowance, a revocation) left the delegate until
    /// `graceUntil`: submissions it signed before the cut still land within the unconfirmed-work window.
    /// What a submission reads and writes (`allowance`, `epoch`, `authorized`, `graceUntil`) shares one slot
    /// (docs/architecture.md, Gas): an allowance is kept to 2^128 - 1 wei, far more ether than exists, so
    /// a larger one (an "unlimited" 2^256 - 1) is kept as that.
    struct DelegateGrant {
        uint128 allowance;
        uint32 epoch;
        bool authorized;
        uint64 graceUntil;
        uint256 graceAllowance;
    }

    /// @dev A wallet's prepaid balance, and the short id a job record names it by (JobBook keeps a job in
    /// one slot: two addresses would not fit). Ids are handed out from 1 on first use and never change.
    /// Every balance is ether held by this contract, so it stays far below 2^128 wei (the supply is
    /// under 2^87) and the narrowing casts below cannot cut it.
    struct Account {
        uint128 balance;
        uint32 id;
    }

    /// @dev A withdrawal the wallet asked for: paid out from `availableAt` on.
    struct WithdrawalRequest {
        uint192 amount;
        uint64 availableAt;
    }

    /// @notice How long a withdrawal request, a lower allowance or a revocation takes to bind a delegate's
    /// submissions (docs/protocol.md, Spending cuts): longer than the window in which a worker does work
    /// on a submission not yet mined, so a wallet cannot take back in the same block what a service
    /// checked before it signed a submission and handed it to the worker.
    uint64 public constant SPEND_CUT_DELAY = 10 minutes;
    /// @dev Marks a fee taken from a cut's grace: its refund restores no allowance.
    uint32 private constant GRACE_EPOCH = type(uint32).max;

    mapping(address user => Account account) private _accounts;
    mapping(uint32 id => address user) private _accountAddresses;
    uint32 private _lastAccountId;
    mapping(address user => mapping(address delegate => DelegateGrant grant)) private _grants;
    mapping(address user => WithdrawalRequest request) private _withdrawals;

    event Deposited(address indexed user, uint256 amount, uint256 newBalance);
    event Withdrew(address indexed user, uint256 amount, uint256 newBalance);
    event DelegateAuthorizationSet(address indexed user, address indexed delegate, bool authorized);
    event DelegateAllowanceSet(address indexed user, address indexed delegate, uint256 allowance);
    event WithdrawalRequested(address indexed user, uint256 amount, uint256 availableAt);

    error ZeroAmount();
    error InvalidDelegate(address delegate);
    error InsufficientBalance(address user, uint256 required, uint256 available);
    error InsufficientAllowance(address user, address delegate, uint256 required, uint256 available);
    error NotOwnerOrDelegate(address owner, address caller);
    error TransferFailed(address to, uint256 amount);
    error WithdrawalNotAvailable(address user, uint256 requested, uint256 availableAt);

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
        uint128 allowance = _kept(grant.allowance + msg.value);
        grant.allowance = allowance;
        emit DelegateAllowanceSet(user, delegate, allowance);
    }

    /// @notice Asks to withdraw `amount` more of the balance (added to what is already asked, and the
    /// delay starts again). From now on `prepaidBalanceOf` leaves it out, so no service starts new work on
    /// it; submissions already signed may still spend it until it is paid out by `withdrawBalance`.
    function requestWithdrawal(uint256 amount) external {
        if (amount == 0) revert ZeroAmount();
        address user = principalOf(msg.sender);
        WithdrawalRequest storage request = _withdrawals[user];
        uint256 total = request.amount + amount;
        uint256 balance = _accounts[user].balance;
        if (total > balance) revert InsufficientBalance(user, total, balance);
        uint256 availableAt = block.timestamp + SPEND_CUT_DELAY;
        request.amount = uint192(total);
        request.availableAt = uint64(availableAt);
        emit WithdrawalRequested(user, total, availableAt);
    }

    /// @notice Pays out `amount` of a withdrawal requested at least `SPEND_CUT_DELAY` ago.
    function withdrawBalance(uint256 amount) external nonReentrant {
        if (amount == 0) revert ZeroAmount();
        address user = principalOf(msg.sender);
        WithdrawalRequest storage request = _withdrawals[user];
        if (amount > request.amount || block.timestamp < request.availableAt) {
            revert WithdrawalNotAvailable(user, request.amount, request.availableAt);
        }
        Account storage account = _accounts[user];
        uint256 balance = account.balance;
        if (amount > balance) revert InsufficientBalance(user, amount, balance);
        request.amount -= uint192(amount);
        uint256 newBalance = balance - amount;
        account.balance = uint128(newBalance);
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
            _startGrace(grant, 0);
            grant.allowance = 0;
            ++grant.epoch;
            emit DelegateAllowanceSet(user, delegate, 0);
        }
    }

    /// @notice Sets `delegate`'s allowance to exactly `allowance` (at most 2^128 - 1 wei is kept, see
    /// `DelegateGrant`) and starts a new allowance epoch.
    function setDelegateAllowance(address delegate, uint256 allowance) external {
        address user = principalOf(msg.sender);
        _requireValidDelegate(user, delegate);
        DelegateGrant storage grant = _grants[user][delegate];
        uint128 kept = _kept(allowance);
        _startGrace(grant, kept);
        grant.allowance = kept;
        ++grant.epoch;
        emit DelegateAllowanceSet(user, delegate, kept);
    }

    /// @notice The balance new work may count on: what is held, less what the wallet asked to withdraw.
    function prepaidBalanceOf(address user) external view returns (uint256) {
        uint256 balance = _accounts[user].balance;
        uint256 requested = _withdrawals[user].amount;
        return requested >= balance ? 0 : balance - requested;
    }

    /// @notice The wallet's withdrawal request: its amount and when it can be paid out.
    function withdrawalRequestOf(address user) external view returns (uint256 amount, uint256 availableAt) {
        WithdrawalRequest storage request = _withdrawals[user];
        return (request.amount, request.availableAt);
    }

    /// @notice What a cut left `delegate` for submissions it signed before it, and until when.
    function delegateGrace(address user, address delegate)
        external
        view
        returns (uint256 allowance, uint256 until)
    {
        DelegateGrant storage grant = _grants[user][delegate];
        if (block.timestamp >= grant.graceUntil) return (0, grant.graceUntil);
        return (grant.graceAllowance, grant.graceUntil);
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

    /// @dev The wallet that pays gives its account an id here, so a service's submissions do not.
    function _deposit(address user, uint256 amount) internal {
        Account storage account = _accounts[user];
        uint256 newBalance = account.balance + amount;
        account.balance = uint128(newBalance);
        if (account.id == 0) _assignAccountId(user, account);
        emit Deposited(user, amount, newBalance);
    }

    /// @return id the payer's account id. A fee is never zero (a fee of 0 disables a model), so a debited
    /// account holds ether, which came through `_deposit`, and that gave it its id.
    function _debit(address user, uint256 amount) internal returns (uint32 id) {
        Account storage account = _accounts[user];
        uint256 balance = account.balance;
        if (amount > balance) revert InsufficientBalance(user, amount, balance);
        account.balance = uint128(balance - amount);
        return account.id;
    }

    function _credit(address user, uint256 amount) internal {
        Account storage account = _accounts[user];
        account.balance = account.balance + uint128(amount);
    }

    /// @dev The account id of `user`, given now if it had none.
    function _accountIdOf(address user) internal returns (uint32 id) {
        Account storage account = _accounts[user];
        id = account.id;
        if (id == 0) id = _assignAccountId(user, account);
    }

    /// @dev The address of account `id` (the zero address for 0, "none").
    function _accountAddress(uint32 id) internal view returns (address) {
        return _accountAddresses[id];
    }

    /// @return epoch the allowance epoch the fee was taken under (none when a cut's grace paid it).
    /// @dev During a cut's grace the delegate spends up to the larger of its allowance and the grace; a
    /// spend takes from both, so together they never pay out more than the allowance before the cut.
    function _spendAllowance(address user, address delegate, uint256 amount) internal returns (uint32 epoch) {
        DelegateGrant storage grant = _grants[user][delegate];
        uint256 allowance = grant.allowance;
        uint256 grace = block.timestamp < grant.graceUntil ? grant.graceAllowance : 0;
        if (amount <= allowance) {
            grant.allowance = uint128(allowance - amount);
            if (grace != 0) grant.graceAllowance = grace > amount ? grace - amount : 0;
            return grant.epoch;
        }
        if (amount > grace) {
            revert InsufficientAllowance(user, delegate, amount, allowance > grace ? allowance : grace);
        }
        grant.allowance = 0;
        grant.graceAllowance = grace - amount;
        return GRACE_EPOCH;
    }

    /// @dev A cut to `next`: what the delegate could spend before it stays spendable for `SPEND_CUT_DELAY`.
    function _startGrace(DelegateGrant storage grant, uint256 next) private {
        uint256 current = grant.allowance;
        if (block.timestamp < grant.graceUntil && grant.graceAllowance > current) current = grant.graceAllowance;
        if (next >= current) return;
        grant.graceAllowance = current;
        grant.graceUntil = uint64(block.timestamp + SPEND_CUT_DELAY);
    }

    /// @dev Whether `principal` may submit a job paid by `owner`: the owner, its delegate, or a delegate
    /// revoked less than `SPEND_CUT_DELAY` ago with grace left (its earlier submissions still land).
    function _maySubmitFor(address owner, address principal) internal view returns (bool) {
        if (_isOwnerOrDelegate(owner, principal)) return true;
        DelegateGrant storage grant = _grants[owner][principal];
        return block.timestamp < grant.graceUntil && grant.graceAllowance != 0;
    }

    /// @dev Gives a refunded fee back to the allowance only while the wallet has not changed it since.
    function _restoreAllowance(address user, address delegate, uint32 epoch, uint256 amount) internal {
        if (delegate == address(0)) return;
        DelegateGrant storage grant = _grants[user][delegate];
        if (grant.epoch != epoch) return;
        uint128 allowance = _kept(grant.allowance + amount);
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

    function _assignAccountId(address user, Account storage account) private returns (uint32 id) {
        id = ++_lastAccountId;
        account.id = id;
        _accountAddresses[id] = user;
    }

    /// @dev An allowance as kept: at most 2^128 - 1 wei (see `DelegateGrant`).
    function _kept(uint256 allowance) private pure returns (uint128) {
        return allowance > type(uint128).max ? type(uint128).max : uint128(allowance);
    }

    function _requireValidDelegate(address user, address delegate) private pure {
        if (delegate == address(0) || delegate == user) revert InvalidDelegate(delegate);
    }
}
