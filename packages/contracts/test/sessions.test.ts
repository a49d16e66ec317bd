import { describe, expect, it } from '@jest/globals';
import { ZeroAddress } from 'ethers';
import { SessionState } from '../src/states.js';
import { useChain } from './support/chain.js';
import { expectRevert } from './support/revert.js';
import {
  DEPLOY_CONFIG,
  MODEL,
  MODEL_ID,
  OTHER_MODEL_ID,
  eventOf,
  fundUserForService,
  mined,
  openActiveSession,
  openSession,
  registerWorker,
  sessionPublicKey,
} from './support/scenario.js';

describe('sessions', () => {
  const chain = useChain(
    DEPLOY_CONFIG,
    async (c) => {
      await registerWorker(c, 'worker');
      await registerWorker(c, 'otherWorker', [OTHER_MODEL_ID]);
      await fundUserForService(c);
    },
    { sendsBlobs: false },
  );

  describe('openSession', () => {
    it('opens for the owner, naming the worker, with a claim deadline one claim window ahead', async () => {
      const { address, provider } = chain();
      const receipt = await mined(chain().jobs('user').openSession(address.user, MODEL_ID, address.worker));
      const opened = eventOf(receipt, 'SessionOpened');
      const timestamp = (await provider.getBlock(receipt.blockNumber))!.timestamp;
      expect(opened.toObject()).toEqual({
        sessionId: 1n,
        owner: address.user,
        modelId: MODEL_ID,
        worker: address.worker,
        claimDeadline: BigInt(timestamp + 30),
      });
      const session = await chain().jobs('stranger').getSession(1n);
      expect(session.owner).toBe(address.user);
      expect(session.worker).toBe(address.worker);
      expect(session.modelId).toBe(MODEL_ID);
      expect(session.state).toBe(BigInt(SessionState.Open));
      expect(session.publicKey).toBe('0x');
    });

    it("may be opened by the owner's delegate or operator, not by anyone else", async () => {
      const { address } = chain();
      const byDelegate = await openSession(chain(), { by: 'service' });
      expect((await chain().jobs('stranger').getSession(byDelegate)).owner).toBe(address.user);
      await mined(chain().jobs('user').setOperator(address.operator, true));
      await mined(chain().jobs('operator').acceptOperator(address.user));
      await openSession(chain(), { by: 'operator' });
      await expectRevert(
        chain().jobs('stranger').openSession(address.user, MODEL_ID, address.worker),
        'NotOwnerOrDelegate',
        { owner: address.user, caller: address.stranger },
      );
      await expectRevert(
        chain().jobs('user').openSession(ZeroAddress, MODEL_ID, address.worker),
        'ZeroAddress',
      );
    });

    it('needs an enabled model and an active worker that serves it', async () => {
      const { address } = chain();
      const jobs = chain().jobs('user');
      await expectRevert(
        jobs.openSession(address.user, MODEL_ID, address.otherWorker),
        'WorkerDoesNotServeModel',
        {
          worker: address.otherWorker,
          modelId: MODEL_ID,
        },
      );
      await expectRevert(jobs.openSession(address.user, MODEL_ID, address.stranger), 'WorkerNotActive', {
        worker: address.stranger,
      });
      await mined(chain().jobs('owner').setModel(MODEL.name, 0n));
      await expectRevert(jobs.openSession(address.user, MODEL_ID, address.worker), 'ModelDisabled', {
        modelId: MODEL_ID,
      });
      await mined(chain().jobs('owner').setModel(MODEL.name, MODEL.feeWei));
      await mined(chain().workers('worker').deregister());
      await expectRevert(jobs.openSession(address.user, MODEL_ID, address.worker), 'WorkerNotActive');
    });
  });

  describe('claimSession', () => {
    it('the named worker claims before the deadline with a 65-byte uncompressed key', async () => {
      const { address } = chain();
      const sessionId = await openSession(chain());
      const key = sessionPublicKey();
      const receipt = await mined(chain().jobs('worker').claimSession(sessionId, key));
      expect(eventOf(receipt, 'SessionClaimed').toObject()).toEqual({
        sessionId,
        worker: address.worker,
        sessionPublicKey: key,
      });
      const session = await chain().jobs('stranger').getSession(sessionId);
      expect(session.state).toBe(BigInt(SessionState.Active));
      expect(session.publicKey).toBe(key);
      await expectRevert(chain().jobs('worker').claimSession(sessionId, key), 'SessionStateInvalid', {
        sessionId,
        state: BigInt(SessionState.Active),
      });
    });

    it('only the named worker claims', async () => {
      const { address } = chain();
      const sessionId = await openSession(chain());
      await expectRevert(
        chain().jobs('otherWorker').claimSession(sessionId, sessionPublicKey()),
        'NotSessionWorker',
        {
          sessionId,
          caller: address.otherWorker,
        },
      );
      await expectRevert(
        chain().jobs('stranger').claimSession(99n, sessionPublicKey()),
        'SessionStateInvalid',
        {
          sessionId: 99n,
          state: BigInt(SessionState.None),
        },
      );
    });

    it('a claim landing exactly at the deadline counts; one after it does not', async () => {
      const { clock } = chain();
      const onTime = await openSession(chain());
      const late = await openSession(chain());
      const { claimDeadline } = await chain().jobs('stranger').getSession(onTime);
      await clock.setNextBlockTimestamp(Number(claimDeadline));
      const receipt = await mined(chain().jobs('worker').claimSession(onTime, sessionPublicKey()));
      expect((await chain().provider.getBlock(receipt.blockNumber))!.timestamp).toBe(Number(claimDeadline));
      const lateDeadline = (await chain().jobs('stranger').getSession(late)).claimDeadline;
      await clock.setNextBlockTimestamp(Number(lateDeadline) + 1);
      await expectRevert(chain().jobs('worker').claimSession(late, sessionPublicKey()), 'ClaimWindowClosed', {
        sessionId: late,
        claimDeadline: lateDeadline,
      });
    });

    it('checks the key length and the uncompressed-point prefix', async () => {
      const sessionId = await openSession(chain());
      const jobs = chain().jobs('worker');
      const key = sessionPublicKey();
      await expectRevert(jobs.claimSession(sessionId, key.slice(0, -2)), 'InvalidSessionPublicKey', {
        length: 64n,
        prefix: '0x04',
      });
      await expectRevert(jobs.claimSession(sessionId, `${key}00`), 'InvalidSessionPublicKey', {
        length: 66n,
      });
      await expectRevert(jobs.claimSession(sessionId, `0x02${key.slice(4)}`), 'InvalidSessionPublicKey', {
        length: 65n,
        prefix: '0x02',
      });
      await expectRevert(jobs.claimSession(sessionId, '0x'), 'InvalidSessionPublicKey', {
        length: 0n,
        prefix: '0x00',
      });
      await expectRevert(jobs.claimSession(sessionId, `0x05${key.slice(4)}`), 'InvalidSessionPublicKey', {
        prefix: '0x05',
      });
    });

    it('a worker that deregistered after the open cannot claim', async () => {
      const sessionId = await openSession(chain());
      await mined(chain().workers('worker').deregister());
      await expectRevert(
        chain().jobs('worker').claimSession(sessionId, sessionPublicKey()),
        'WorkerNotActive',
      );
    });
  });

  describe('closeSession', () => {
    it('owner, delegate and worker close at any time', async () => {
      for (const closer of ['user', 'service', 'worker'] as const) {
        const sessionId = await openActiveSession(chain());
        const receipt = await mined(chain().jobs(closer).closeSession(sessionId));
        expect(eventOf(receipt, 'SessionClosed').sessionId).toBe(sessionId);
        expect((await chain().jobs('stranger').getSession(sessionId)).state).toBe(
          BigInt(SessionState.Closed),
        );
      }
      const unclaimed = await openSession(chain());
      await mined(chain().jobs('user').closeSession(unclaimed));
      await expectRevert(chain().jobs('user').closeSession(unclaimed), 'SessionStateInvalid', {
        state: BigInt(SessionState.Closed),
      });
      await expectRevert(chain().jobs('user').closeSession(1234n), 'SessionStateInvalid', {
        state: BigInt(SessionState.None),
      });
    });

    it('anyone closes a session left unclaimed past its deadline, not before', async () => {
      const { address, clock } = chain();
      const sessionId = await openSession(chain());
      const { claimDeadline } = await chain().jobs('stranger').getSession(sessionId);
      await clock.setNextBlockTimestamp(Number(claimDeadline));
      await expectRevert(chain().jobs('stranger').closeSession(sessionId), 'SessionNotClosable', {
        sessionId,
        caller: address.stranger,
      });
      await clock.setNextBlockTimestamp(Number(claimDeadline) + 1);
      await mined(chain().jobs('stranger').closeSession(sessionId));
    });

    it('anyone closes an Active session idle past the inactivity timeout, not before', async () => {
      const { clock } = chain();
      const sessionId = await openActiveSession(chain());
      const { lastActivityAt } = await chain().jobs('stranger').getSession(sessionId);
      await clock.setNextBlockTimestamp(Number(lastActivityAt) + 1_800);
      await expectRevert(chain().jobs('stranger').closeSession(sessionId), 'SessionNotClosable');
      await clock.setNextBlockTimestamp(Number(lastActivityAt) + 1_800 + 1);
      await mined(chain().jobs('stranger').closeSession(sessionId));
    });

    it('a claimed session keeps its key after closing', async () => {
      const sessionId = await openSession(chain());
      const key = sessionPublicKey();
      await mined(chain().jobs('worker').claimSession(sessionId, key));
      await mined(chain().jobs('user').closeSession(sessionId));
      expect((await chain().jobs('stranger').getSession(sessionId)).publicKey).toBe(key);
    });
  });

  it('pause stops opening and claiming, not closing', async () => {
    const { address } = chain();
    const open = await openSession(chain());
    const active = await openActiveSession(chain());
    await mined(chain().jobs('owner').pause());
    await expectRevert(
      chain().jobs('user').openSession(address.user, MODEL_ID, address.worker),
      'EnforcedPause',
    );
    await expectRevert(chain().jobs('worker').claimSession(open, sessionPublicKey()), 'EnforcedPause');
    await mined(chain().jobs('user').closeSession(active));
    await mined(chain().jobs('owner').unpause());
    await mined(chain().jobs('worker').claimSession(open, sessionPublicKey()));
  });
});
