export default function Step(props) {
  return (
    <div className="step">
      <strong>{props.title}</strong>
      <p>{props.description}</p>
    </div>
  );
}
