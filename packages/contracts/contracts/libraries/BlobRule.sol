// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @notice A prompt travels as exactly one blob of the submitting transaction.
library BlobRule {
    /// @dev Cancun and later allow at most this many blobs per transaction, so counting stops here.
    uint256 private constant MAX_BLOBS_COUNTED = 16;

    error BlobCountInvalid(uint256 count);

    /// @return hash the versioned hash of the transaction's only blob.
    function singleBlobHash() internal view returns (bytes32 hash) {
        hash = blobhash(0);
        if (hash == bytes32(0) || blobhash(1) != bytes32(0)) revert BlobCountInvalid(_countBlobs());
    }

    function _countBlobs() private view returns (uint256 count) {
        while (count < MAX_BLOBS_COUNTED && blobhash(count) != bytes32(0)) ++count;
    }
}
