import React, { useEffect, useState } from "react";
import { fetchUser } from "../api/users";

export interface User {
  id: string;
  name: string;
  email: string;
}

interface UserCardProps {
  userId: string;
  compact?: boolean;
}

function initials(name: string): string {
  return name
    .split(" ")
    .map((part) => part[0])
    .join("")
    .toUpperCase();
}

export function Avatar({ name }: { name: string }) {
  return <span className="avatar">{initials(name)}</span>;
}

export default function UserCard({ userId, compact = false }: UserCardProps) {
  const [user, setUser] = useState<User | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let cancelled = false;
    fetchUser(userId)
      .then((u) => {
        if (!cancelled) setUser(u);
      })
      .catch((e: Error) => setError(e.message));
    return () => {
      cancelled = true;
    };
  }, [userId]);

  if (error) {
    return <div className="error">{error}</div>;
  }
  // cursor here
  if (!user) {
    return <div className="loading">Loading...</div>;
  }
  return (
    <div className={compact ? "card compact" : "card"}>
      <Avatar name={user.name} />
      <span>{user.email}</span>
    </div>
  );
}

export const EmptyCard = () => <div className="card empty" />;
