import { useEffect, useState } from 'preact/hooks';
import { shorten } from '../amounts.js';
import { isLapsed, timeLeft, type SignInSession } from '../wallet/sign-in-session.js';

/** Who is signed in and for how long; tells the app the moment the token lapses. */
export function SessionStatus(props: {
  session: SignInSession;
  onSignOut: () => void;
  onLapsed: () => void;
}) {
  const { session, onLapsed } = props;
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1_000);
    return () => clearInterval(timer);
  }, []);
  const lapsed = isLapsed(session, now);
  useEffect(() => {
    if (lapsed) onLapsed();
  }, [lapsed, onLapsed]);
  return (
    <div class="session">
      <span title={session.address}>
        <span class="visually-hidden">Signed in as </span>
        <code>{shorten(session.address)}</code>
      </span>
      <span class="expiry" title={new Date(session.expiresAt).toLocaleString()}>
        Sign-in expires {timeLeft(session, now)}
      </span>
      <button type="button" onClick={props.onSignOut}>
        Sign out
      </button>
    </div>
  );
}
