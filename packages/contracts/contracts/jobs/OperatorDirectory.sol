// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @notice Principals and the operator accounts that act for them. A service sends from a pool of
/// accounts (a node holds few pending blob transactions per account), yet balances, sessions and
/// rights belong to one principal.
/// @dev Naming is two-step: the principal offers, the operator accepts. Otherwise anyone could name
/// a stranger's account as its operator and hijack what that account's transactions mean.
abstract contract OperatorDirectory {
    mapping(address operator => address principal) private _principalOfOperator;
    mapping(address principal => uint256 count) private _operatorCount;
    mapping(address principal => mapping(address operator => bool offered)) private _operatorOffers;

    event OperatorOffered(address indexed principal, address indexed operator);
    event OperatorSet(address indexed principal, address indexed operator, bool allowed);

    error InvalidOperator(address operator);
    error CallerIsOperator(address caller, address principal);
    error OperatorTaken(address operator, address principal);
    error PrincipalHasOperators(address account);
    error NotOperatorOf(address principal, address operator);
    error NoOperatorOffer(address principal, address operator);

    /// @notice Offers (`allowed`) or withdraws the operator role for the caller. An offer takes
    /// effect once `operator` calls `acceptOperator`.
    function setOperator(address operator, bool allowed) external {
        address principal = msg.sender;
        address principalOfCaller = _principalOfOperator[principal];
        if (principalOfCaller != address(0)) revert CallerIsOperator(principal, principalOfCaller);
        if (allowed) {
            if (operator == address(0) || operator == principal) revert InvalidOperator(operator);
            address current = _principalOfOperator[operator];
            if (current != address(0)) revert OperatorTaken(operator, current);
            _operatorOffers[principal][operator] = true;
            emit OperatorOffered(principal, operator);
            return;
        }
        if (_principalOfOperator[operator] == principal) {
            delete _principalOfOperator[operator];
            --_operatorCount[principal];
            emit OperatorSet(principal, operator, false);
        } else if (_operatorOffers[principal][operator]) {
            delete _operatorOffers[principal][operator];
            emit OperatorSet(principal, operator, false);
        } else {
            revert NotOperatorOf(principal, operator);
        }
    }

    /// @notice Accepts `principal`'s offer: from now on the caller acts for `principal`.
    function acceptOperator(address principal) external {
        address operator = msg.sender;
        if (!_operatorOffers[principal][operator]) revert NoOperatorOffer(principal, operator);
        address current = _principalOfOperator[operator];
        if (current != address(0)) revert OperatorTaken(operator, current);
        // One level only: an account with operators of its own stays a principal.
        if (_operatorCount[operator] != 0) revert PrincipalHasOperators(operator);
        address principalOfPrincipal = _principalOfOperator[principal];
        if (principalOfPrincipal != address(0)) revert CallerIsOperator(principal, principalOfPrincipal);
        delete _operatorOffers[principal][operator];
        _principalOfOperator[operator] = principal;
        ++_operatorCount[principal];
        emit OperatorSet(principal, operator, true);
    }

    /// @notice The account `account` acts for: the principal that named it operator, else itself.
    function principalOf(address account) public view virtual returns (address) {
        address principal = _principalOfOperator[account];
        return principal == address(0) ? account : principal;
    }

    function isOperatorOffered(address principal, address operator) external view returns (bool) {
        return _operatorOffers[principal][operator];
    }
}
